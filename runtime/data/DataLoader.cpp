//===- DataLoader.cpp - (B, T) training batches from a token dataset ------===//

#include "runtime/data/DataLoader.h"

#include "runtime/data/TokenFile.h"

#include <algorithm>
#include <numeric>
#include <utility>

namespace gptc::data {

uint64_t SplitMix64::next() {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

uint64_t SplitMix64::below(uint64_t bound) {
  // Reject the top partial block of 2^64 so every residue is equally likely.
  uint64_t threshold = (0 - bound) % bound;
  while (true) {
    uint64_t r = next();
    if (r >= threshold)
      return r % bound;
  }
}

StatusOr<DataLoader> DataLoader::open(const std::string &spec,
                                      const DataLoaderOptions &options, int64_t vocabSize) {
  StatusOr<Dataset> dataset = Dataset::open(spec);
  if (!dataset)
    return dataset.status();
  if (dataset->size() <= kEagerVocabularyCheck)
    if (Status st = dataset->checkVocabulary(vocabSize); !st)
      return st;
  StatusOr<DataLoader> loader = create(std::move(*dataset), options, vocabSize);
  if (!loader)
    return Status::error(spec + ": " + loader.status().message());
  return loader;
}

StatusOr<DataLoader> DataLoader::create(std::vector<uint16_t> tokens,
                                        const DataLoaderOptions &options) {
  return create(Dataset::fromTokens(std::move(tokens)), options);
}

StatusOr<DataLoader> DataLoader::create(Dataset dataset, const DataLoaderOptions &options,
                                        int64_t vocabSize) {
  const DataLoaderOptions &o = options;
  if (o.batchSize <= 0 || o.seqLen <= 0)
    return Status::error("batch size and sequence length must be positive (B=" +
                         std::to_string(o.batchSize) + ", T=" + std::to_string(o.seqLen) +
                         ")");
  if (o.worldSize <= 0 || o.rank < 0 || o.rank >= o.worldSize)
    return Status::error("rank " + std::to_string(o.rank) +
                         " is not in 0..world_size-1 (world_size " +
                         std::to_string(o.worldSize) + ")");
  const uint64_t n = dataset.size();
  const uint64_t stepTokens =
      uint64_t(o.batchSize) * uint64_t(o.seqLen) * uint64_t(o.worldSize);
  if (n < stepTokens + 1)
    return Status::error(std::to_string(n) + " tokens are too few for one batch: B=" +
                         std::to_string(o.batchSize) + " T=" + std::to_string(o.seqLen) +
                         " world_size=" + std::to_string(o.worldSize) +
                         " needs at least " + std::to_string(stepTokens + 1));
  DataLoader loader;
  loader.data = std::move(dataset);
  loader.opts = options;
  loader.vocab = vocabSize;
  loader.steps = static_cast<int64_t>((n - 1) / stepTokens);
  return loader;
}

void DataLoader::preparePermutation(int64_t epoch) const {
  if (!opts.shuffle || permutationEpoch == epoch)
    return;
  permutation.resize(steps);
  std::iota(permutation.begin(), permutation.end(), int64_t(0));
  // Seed per epoch so that seeking needs no replay of earlier epochs.
  SplitMix64 rng(opts.seed ^ (0xD1B54A32D192ED03ull * uint64_t(epoch + 1)));
  for (int64_t i = steps - 1; i > 0; --i)
    std::swap(permutation[i], permutation[rng.below(uint64_t(i) + 1)]);
  permutationEpoch = epoch;
}

int64_t DataLoader::currentWindow() const {
  int64_t step = static_cast<int64_t>(pos % steps);
  if (opts.shuffle) {
    preparePermutation(epoch());
    step = permutation[step];
  }
  return step * opts.worldSize + opts.rank;
}

void DataLoader::next(int32_t *inputs, int32_t *targets) {
  const int64_t bt = opts.batchSize * opts.seqLen;
  window.resize(bt + 1);
  Status st = data.read(uint64_t(currentWindow()) * uint64_t(bt), uint64_t(bt) + 1,
                        window.data(), vocab);
  if (!st && error)
    error = std::move(st);
  std::copy(window.begin(), window.end() - 1, inputs);
  std::copy(window.begin() + 1, window.end(), targets);
  ++pos;
}

void DataLoader::next(std::vector<int32_t> &inputs, std::vector<int32_t> &targets) {
  inputs.resize(opts.batchSize * opts.seqLen);
  targets.resize(opts.batchSize * opts.seqLen);
  next(inputs.data(), targets.data());
}

void DataLoader::seek(uint64_t position) { pos = position; }

} // namespace gptc::data

//===- DataLoader.h - (B, T) training batches from a token file -----------===//
//
// The token stream is cut into windows of B*T+1 tokens that overlap by one:
// window w starts at token w*B*T. A batch is one window; row b of the
// inputs is tokens[w*B*T + b*T, +T) and the targets are the same shifted
// by one token (the next-token labels), as in llm.c's loader.
//
// With world_size > 1 every step takes world_size consecutive windows and
// rank r reads window step*world_size + r, so ranks never share a window
// and all of them see the same number of steps. Shuffling permutes the
// steps of each epoch with a permutation fixed by (seed, epoch) and the same
// on every rank; it uses its own RNG (splitmix64 + unbiased bounded draws)
// because std::shuffle and std::uniform_int_distribution differ between
// standard libraries.
//
// The whole state is the step count, position(): a checkpoint stores it
// and seek() restores it.
//
//===----------------------------------------------------------------------===//

#ifndef GPTC_RUNTIME_DATA_DATALOADER_H
#define GPTC_RUNTIME_DATA_DATALOADER_H

#include "runtime/support/Status.h"

#include <cstdint>
#include <string>
#include <vector>

namespace gptc::data {

struct DataLoaderOptions {
  int64_t batchSize = 1; // B
  int64_t seqLen = 1;    // T
  bool shuffle = false;
  uint64_t seed = 0;
  int64_t rank = 0;
  int64_t worldSize = 1;
};

/// splitmix64: a tiny, well-mixed, fully specified 64-bit generator.
class SplitMix64 {
public:
  explicit SplitMix64(uint64_t seed) : state(seed) {}
  uint64_t next();
  /// Uniform in [0, bound), bound > 0, without modulo bias.
  uint64_t below(uint64_t bound);

private:
  uint64_t state;
};

class DataLoader {
public:
  /// Reads `path` (see TokenFile.h) and checks the options against it.
  static StatusOr<DataLoader> open(const std::string &path, const DataLoaderOptions &options,
                                   int64_t vocabSize = 0);
  /// The same over tokens already in memory.
  static StatusOr<DataLoader> create(std::vector<uint16_t> tokens,
                                     const DataLoaderOptions &options);

  /// Fills inputs and targets, B*T ids each (row-major (B, T)), and advances.
  /// After the last step of an epoch the next epoch begins (reshuffled).
  void next(int32_t *inputs, int32_t *targets);
  void next(std::vector<int32_t> &inputs, std::vector<int32_t> &targets);

  /// Steps per epoch: floor((N - 1) / (B*T*world_size)).
  int64_t stepsPerEpoch() const { return steps; }
  /// Steps taken since the start: the resumable state.
  uint64_t position() const { return pos; }
  int64_t epoch() const { return static_cast<int64_t>(pos / steps); }
  /// The window the next batch of this rank reads.
  int64_t currentWindow() const;
  /// The first token of the next batch of this rank.
  int64_t currentTokenOffset() const { return currentWindow() * opts.batchSize * opts.seqLen; }

  void reset() { seek(0); }
  void seek(uint64_t position);

  const std::vector<uint16_t> &tokens() const { return data; }
  const DataLoaderOptions &options() const { return opts; }

private:
  DataLoader() = default;
  void preparePermutation(int64_t epoch) const;

  std::vector<uint16_t> data;
  DataLoaderOptions opts;
  int64_t steps = 0;
  uint64_t pos = 0;
  // The current epoch's step order when shuffling, built on first use.
  mutable int64_t permutationEpoch = -1;
  mutable std::vector<int64_t> permutation;
};

} // namespace gptc::data

#endif // GPTC_RUNTIME_DATA_DATALOADER_H

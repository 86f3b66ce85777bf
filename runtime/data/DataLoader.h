//===- DataLoader.h - (B, T) training batches from a token dataset --------===//
//
// The token stream is a Dataset's (Dataset.h): one token file, a directory
// of shards or a glob, read as the concatenation of its files. It is cut
// into windows of B*T+1 tokens that overlap by one: window w starts at
// token w*B*T. A batch is one window; row b of the inputs is
// tokens[w*B*T + b*T, +T) and the targets are the same shifted by one token
// (the next-token labels), as in llm.c's loader.
//
// With world_size > 1 every step takes world_size consecutive windows and
// rank r reads window step*world_size + r, so ranks never share a window
// and all of them see the same number of steps. Shuffling permutes the
// steps of each epoch with a permutation fixed by (seed, epoch) and the same
// on every rank; it uses its own RNG (splitmix64 + unbiased bounded draws)
// because std::shuffle and std::uniform_int_distribution differ between
// standard libraries.
//
// Windows are defined over the whole concatenated stream and may span two
// shards, so the order is a function of (seed, position) and of the total
// token count only: the same on every host, and a set of shards reads
// exactly as the single file holding their concatenation.
//
// The whole state is the step count, position(): a checkpoint stores it
// and seek() restores it, mid-shard or not.
//
// Ids are checked against the vocabulary as each window is read (next()
// records the first bad one in status(), naming the file and the index in
// it); a dataset of at most kEagerVocabularyCheck tokens is also checked
// whole when it opens, which is cheap at that size and fails before
// training starts.
//
//===----------------------------------------------------------------------===//

#ifndef GPTC_RUNTIME_DATA_DATALOADER_H
#define GPTC_RUNTIME_DATA_DATALOADER_H

#include "runtime/data/Dataset.h"
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
  /// Datasets up to this many tokens (512 MB) have every id checked at open().
  static constexpr uint64_t kEagerVocabularyCheck = uint64_t(1) << 28;

  /// Opens the dataset `spec` names (a file, a directory or a glob; see
  /// Dataset.h) and checks the options against it.
  static StatusOr<DataLoader> open(const std::string &spec, const DataLoaderOptions &options,
                                   int64_t vocabSize = 0);
  /// The same over tokens already in memory.
  static StatusOr<DataLoader> create(std::vector<uint16_t> tokens,
                                     const DataLoaderOptions &options);
  /// The same over a dataset already open; ids are checked as they are read.
  static StatusOr<DataLoader> create(Dataset dataset, const DataLoaderOptions &options,
                                     int64_t vocabSize = 0);

  /// Fills inputs and targets, B*T ids each (row-major (B, T)), and advances.
  /// After the last step of an epoch the next epoch begins (reshuffled).
  /// An id outside the vocabulary sets status() (the first such error stays).
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

  /// Ok, or the first id outside the vocabulary that next() read.
  const Status &status() const { return error; }

  const Dataset &dataset() const { return data; }
  uint64_t tokenCount() const { return data.size(); }
  const DataLoaderOptions &options() const { return opts; }

private:
  DataLoader() = default;
  void preparePermutation(int64_t epoch) const;

  Dataset data;
  DataLoaderOptions opts;
  int64_t vocab = 0;
  Status error = Status::ok();
  std::vector<int32_t> window; // B*T+1 ids, next()'s scratch
  int64_t steps = 0;
  uint64_t pos = 0;
  // The current epoch's step order when shuffling, built on first use.
  mutable int64_t permutationEpoch = -1;
  mutable std::vector<int64_t> permutation;
};

} // namespace gptc::data

#endif // GPTC_RUNTIME_DATA_DATALOADER_H

//===- Dataset.h - a token stream made of memory-mapped token files -------===//
//
// A dataset is one or more llm.c token files (TokenFile.h), read as the
// concatenation of their tokens in a fixed order: windows may span two
// shards, so a dataset of one file reads exactly as that file did, and a
// set of shards reads exactly as the file made by concatenating them.
//
// `spec` names the files in one of three forms:
//   - a file:      wiki.bin
//   - a directory: data/fineweb10B   (its *.bin files, not recursing)
//   - a glob:      'data/fineweb_train_*.bin' (expanded here with glob(3),
//                  so a quoted pattern works as well as a shell-expanded one)
// The files are sorted by name (bytewise, whatever the locale), so the order
// is the same on every host.
//
// Each file is memory-mapped read-only and shared (MAP_SHARED), so host
// memory does not grow with the dataset and ranks in threads or processes
// share the page cache. Every header is checked when the dataset opens
// (magic, version, token count against the file size, a regular file), with
// the file named in the error; ids are checked against the vocabulary as
// windows are read (read()), with the file and the token's index in it.
//
//===----------------------------------------------------------------------===//

#ifndef GPTC_RUNTIME_DATA_DATASET_H
#define GPTC_RUNTIME_DATA_DATASET_H

#include "runtime/support/Status.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace gptc::data {

/// A read-only, shared mapping of a whole file; unmapped when the last
/// copy of the shared_ptr holding it goes.
class MappedFile {
public:
  static StatusOr<std::shared_ptr<MappedFile>> open(const std::string &path);
  ~MappedFile();
  MappedFile(const MappedFile &) = delete;
  MappedFile &operator=(const MappedFile &) = delete;

  const uint8_t *data() const { return static_cast<const uint8_t *>(base); }
  uint64_t size() const { return bytes; }

private:
  MappedFile() = default;
  void *base = nullptr;
  uint64_t bytes = 0;
};

/// The token files `spec` names, sorted; an error if it names none.
StatusOr<std::vector<std::string>> resolveTokenFiles(const std::string &spec);

class Dataset {
public:
  struct Shard {
    std::string path;         // "" for tokens given in memory
    const uint16_t *tokens = nullptr;
    uint64_t count = 0;       // tokens in this shard
    uint64_t first = 0;       // its first token's index in the dataset
  };

  /// Resolves `spec`, maps every file and checks every header.
  static StatusOr<Dataset> open(const std::string &spec);
  /// One shard of tokens already in memory.
  static Dataset fromTokens(std::vector<uint16_t> tokens);

  uint64_t size() const { return total; }
  const std::vector<Shard> &shards() const { return parts; }

  /// Tokens [start, start + count) as int32 into `out`, across shards. With
  /// vocabSize > 0 an id >= vocabSize is an error naming its file and index
  /// in that file (`out` is filled all the same).
  Status read(uint64_t start, uint64_t count, int32_t *out, int64_t vocabSize = 0) const;
  /// Every id against the vocabulary: a full read of the dataset.
  Status checkVocabulary(int64_t vocabSize) const;

  /// What checkpoints record to recognise the data. One shard: the hash of
  /// its tokens (what checkpoints have always stored, a full read). Several:
  /// a hash of each shard's file name, token count and first and last 4096
  /// tokens, cheap whatever the dataset's size.
  uint64_t identity() const;

private:
  std::vector<Shard> parts;
  uint64_t total = 0;
  // What keeps the tokens alive: the mappings, or the vector given.
  std::vector<std::shared_ptr<const void>> owners;
};

} // namespace gptc::data

#endif // GPTC_RUNTIME_DATA_DATASET_H

//===- TokenShards.h - token files written as a stream, and llm.c shards --===//
//
// TokenFileWriter writes one llm.c token file (TokenFile.h) whose length is
// not known in advance: the tokens go to a temporary file beside the
// destination as they come (the header's count is filled in at the end),
// and commit() renames it into place after an fsync, so a reader never
// sees a partial file and a failed or interrupted run leaves at most a
// "NAME.tmp-XXXXXX" behind, never a short NAME.
//
// ShardedTokenWriter cuts one token stream into llm.c's shards, named as
// llm.c's dev/data/fineweb.py names them:
//   PREFIX_val_000000.bin    the validation split (first), then
//   PREFIX_train_000001.bin  PREFIX_train_000002.bin ...
// with one running index over both splits. The validation split is the
// first whole documents of the stream: it ends at the first document start
// at which it holds at least `valTokens` tokens (or `valDocuments`
// documents), so no document is cut between the splits (llm.c cuts at
// exactly one shard's size), and its shards end at the first document start
// at or after `shardTokens` tokens. Training shards hold exactly
// `shardTokens` tokens but the last: a document may continue from one into
// the next, which readers see as one stream (Dataset.h), as in llm.c.
//
//===----------------------------------------------------------------------===//

#ifndef GPTC_RUNTIME_DATA_TOKENSHARDS_H
#define GPTC_RUNTIME_DATA_TOKENSHARDS_H

#include "runtime/support/Status.h"

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace gptc::data {

/// The most tokens one llm.c token file can hold (its header's int32 count).
constexpr uint64_t kMaxTokensPerFile = 0x7FFFFFFF;

class TokenFileWriter {
public:
  /// Creates the temporary file for `path` (in its directory).
  static StatusOr<std::unique_ptr<TokenFileWriter>> create(const std::string &path);
  /// Removes the temporary file unless commit() succeeded.
  ~TokenFileWriter();
  TokenFileWriter(const TokenFileWriter &) = delete;
  TokenFileWriter &operator=(const TokenFileWriter &) = delete;

  /// Appends ids, each in 0..65535, up to kMaxTokensPerFile in all.
  Status append(const int32_t *ids, size_t count);
  /// Tokens appended so far.
  uint64_t count() const { return tokens; }
  const std::string &path() const { return target; }

  /// Writes the header, fsyncs and renames the file into place.
  Status commit();

private:
  TokenFileWriter() = default;
  Status flush();

  std::string target, temporary;
  int fd = -1;
  std::vector<char> buffer;
  uint64_t tokens = 0;
  bool committed = false;
};

/// What a stream of encoded documents is written to, in order: `ids` are the
/// next tokens and `documentStarts` the indices in `ids` (ascending) where a
/// document begins (its <|endoftext|>).
class TokenSink {
public:
  virtual ~TokenSink() = default;
  virtual Status write(const std::vector<int32_t> &ids,
                       const std::vector<size_t> &documentStarts) = 0;
  /// After the last write: commits what is still open.
  virtual Status finish() = 0;
  /// After a failure: removes every file this sink committed.
  virtual void discard() = 0;
};

/// Everything into one token file.
class SingleFileSink : public TokenSink {
public:
  explicit SingleFileSink(std::string path) : target(std::move(path)) {}
  Status write(const std::vector<int32_t> &ids, const std::vector<size_t> &) override;
  Status finish() override;
  void discard() override;
  uint64_t tokens() const { return total; }

private:
  std::string target;
  std::unique_ptr<TokenFileWriter> file;
  uint64_t total = 0;
  bool written = false;
};

struct ShardOptions {
  std::string prefix;                 // "data/fineweb/fineweb"
  uint64_t shardTokens = 100000000;   // llm.c's 1e8
  uint64_t valTokens = 0;             // the split's size, in tokens ...
  uint64_t valDocuments = 0;          // ... or in documents (0 and 0: no split)
};

/// The shard of `split` ("train" or "val") with running index `index`:
/// PREFIX_split_NNNNNN.bin.
std::string shardPath(const std::string &prefix, const std::string &split, uint64_t index);

/// Files in PREFIX's directory named like its shards (PREFIX_train_N.bin,
/// PREFIX_val_N.bin, N all digits), sorted.
StatusOr<std::vector<std::string>> existingShards(const std::string &prefix);

class ShardedTokenWriter : public TokenSink {
public:
  struct Shard {
    std::string path;
    bool val;
    uint64_t tokens;
  };

  explicit ShardedTokenWriter(ShardOptions options) : opts(std::move(options)) {}
  /// Calls back with each shard as it is committed.
  void onShard(std::function<void(const Shard &)> callback) { shardDone = std::move(callback); }

  Status write(const std::vector<int32_t> &ids,
               const std::vector<size_t> &documentStarts) override;
  /// Commits the last shard; an error if no token went to training.
  Status finish() override;
  void discard() override;

  const std::vector<Shard> &shards() const { return done; }
  uint64_t valTokens() const { return valCount; }
  uint64_t trainTokens() const { return trainCount; }

private:
  Status put(const int32_t *ids, size_t count);
  Status closeShard();

  ShardOptions opts;
  std::function<void(const Shard &)> shardDone;
  bool inVal = false, started = false;
  uint64_t valCount = 0, valDocs = 0, trainCount = 0;
  uint64_t nextIndex = 0;
  std::unique_ptr<TokenFileWriter> current;
  bool currentIsVal = false;
  std::vector<Shard> done;
};

} // namespace gptc::data

#endif // GPTC_RUNTIME_DATA_TOKENSHARDS_H

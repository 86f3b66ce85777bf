//===- TokenShardsTest.cpp - streamed token files and llm.c shards --------===//

#include "DataTestUtils.h"

#include "runtime/data/Dataset.h"
#include "runtime/data/TokenFile.h"
#include "runtime/data/TokenShards.h"

#include <filesystem>
#include <numeric>

using namespace gptc;
using namespace gptc::data;
using gptc::data::testing::tempPath;
namespace fs = std::filesystem;

namespace {

std::string freshDir(const std::string &name) {
  std::string dir = tempPath(name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

std::vector<std::string> listDir(const std::string &dir) {
  std::vector<std::string> names;
  for (const fs::directory_entry &e : fs::directory_iterator(dir))
    names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

std::vector<uint16_t> read(const std::string &path) {
  StatusOr<std::vector<uint16_t>> t = readTokenFile(path);
  EXPECT_TRUE(t) << t.status().message();
  return t ? *t : std::vector<uint16_t>{};
}

// Verify that a streamed token file is the file writeTokenFile writes, that
// nothing appears under its name before commit(), and that an abandoned
// writer leaves no temporary behind.
TEST(TokenShardsTest, TokenFileWriterStreams) {
  std::string dir = freshDir("shards-writer");
  std::vector<int32_t> ids(3 << 19); // 3 MiB of tokens: several buffer flushes
  for (size_t i = 0; i < ids.size(); ++i)
    ids[i] = int32_t((i * 7919) % 65536);
  {
    StatusOr<std::unique_ptr<TokenFileWriter>> w = TokenFileWriter::create(dir + "/a.bin");
    ASSERT_TRUE(w) << w.status().message();
    ASSERT_TRUE((*w)->append(ids.data(), 1000));
    ASSERT_TRUE((*w)->append(ids.data() + 1000, ids.size() - 1000));
    EXPECT_EQ((*w)->count(), ids.size());
    EXPECT_FALSE(fs::exists(dir + "/a.bin"));
    ASSERT_TRUE((*w)->commit());
  }
  ASSERT_TRUE(writeTokenFile(dir + "/b.bin", ids));
  EXPECT_EQ(read(dir + "/a.bin"), read(dir + "/b.bin"));
  EXPECT_EQ(fs::file_size(dir + "/a.bin"), fs::file_size(dir + "/b.bin"));
  EXPECT_EQ(fs::status(dir + "/a.bin").permissions() & fs::perms::all,
            fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read |
                fs::perms::others_read);
  {
    StatusOr<std::unique_ptr<TokenFileWriter>> w = TokenFileWriter::create(dir + "/c.bin");
    ASSERT_TRUE(w);
    ASSERT_TRUE((*w)->append(ids.data(), 10));
    int32_t bad[2] = {5, 70000};
    Status s = (*w)->append(bad, 2);
    ASSERT_FALSE(s);
    EXPECT_EQ(s.message(), dir + "/c.bin: token 70000 at index 11 does not fit uint16");
  }
  EXPECT_EQ(listDir(dir), (std::vector<std::string>{"a.bin", "b.bin"}));
}

TEST(TokenShardsTest, ShardNames) {
  EXPECT_EQ(shardPath("d/fineweb", "val", 0), "d/fineweb_val_000000.bin");
  EXPECT_EQ(shardPath("d/fineweb", "train", 12), "d/fineweb_train_000012.bin");
  EXPECT_EQ(shardPath("x", "train", 1234567), "x_train_1234567.bin");
  std::string dir = freshDir("shards-names");
  for (const char *name : {"w_train_000001.bin", "w_val_000000.bin", "w_train_x.bin",
                           "w_train_000002.bin.tmp-abc", "ww_train_000001.bin", "w_test_000001.bin"})
    ASSERT_TRUE(writeTokenFile(dir + "/" + name, {1}));
  StatusOr<std::vector<std::string>> found = existingShards(dir + "/w");
  ASSERT_TRUE(found);
  EXPECT_EQ(*found, (std::vector<std::string>{dir + "/w_train_000001.bin",
                                              dir + "/w_val_000000.bin"}));
  found = existingShards(dir + "/none/w");
  ASSERT_TRUE(found);
  EXPECT_TRUE(found->empty());
}

/// Documents of `sizes` tokens each (the first token the document start),
/// token values running on, written in writes of `chunk` tokens.
struct Stream {
  std::vector<int32_t> ids;
  std::vector<size_t> starts;
};
Stream documents(const std::vector<size_t> &sizes) {
  Stream s;
  for (size_t n : sizes) {
    s.starts.push_back(s.ids.size());
    for (size_t i = 0; i < n; ++i)
      s.ids.push_back(int32_t(s.ids.size() % 50000));
  }
  return s;
}

Status writeInChunks(TokenSink &sink, const Stream &s, size_t chunk) {
  for (size_t at = 0; at < s.ids.size(); at += chunk) {
    size_t end = std::min(s.ids.size(), at + chunk);
    std::vector<int32_t> ids(s.ids.begin() + at, s.ids.begin() + end);
    std::vector<size_t> starts;
    for (size_t st : s.starts)
      if (st >= at && st < end)
        starts.push_back(st - at);
    if (Status st = sink.write(ids, starts); !st)
      return st;
  }
  return sink.finish();
}

struct Written {
  std::string name;
  size_t tokens;
  bool operator==(const Written &o) const { return name == o.name && tokens == o.tokens; }
};
std::ostream &operator<<(std::ostream &os, const Written &w) {
  return os << w.name << ":" << w.tokens;
}

std::vector<Written> shardsIn(const std::string &dir) {
  std::vector<Written> out;
  for (const std::string &name : listDir(dir))
    out.push_back({name, read(dir + "/" + name).size()});
  return out;
}

/// The concatenation of the shards in index order equals the stream.
void expectConcatenation(const std::string &dir, const Stream &s) {
  std::vector<std::string> files;
  for (const std::string &name : listDir(dir))
    files.push_back(name);
  std::sort(files.begin(), files.end(), [](const std::string &a, const std::string &b) {
    return a.substr(a.size() - 10) < b.substr(b.size() - 10); // by the running index
  });
  std::vector<int32_t> all;
  for (const std::string &f : files)
    for (uint16_t t : read(dir + "/" + f))
      all.push_back(t);
  EXPECT_TRUE(all == s.ids);
}

// Verify the layout: training shards of exactly --shard-tokens but the
// last; the validation split ends at the first document start at which it
// holds --val-tokens (or --val-documents), its shards at a document start
// at or after --shard-tokens; one running index, val first; the shards
// concatenate to the stream whatever the write sizes.
TEST(TokenShardsTest, ShardSizesAndValidationSplit) {
  const Stream s = documents({30, 45, 10, 70, 5, 100, 40, 1, 60}); // 361 tokens
  struct Case {
    uint64_t shard, valTokens, valDocs;
    std::vector<Written> expected;
  };
  const Case cases[] = {
      // No split: 100-token shards from index 0.
      {100, 0, 0, {{"p_train_000000.bin", 100}, {"p_train_000001.bin", 100},
                   {"p_train_000002.bin", 100}, {"p_train_000003.bin", 61}}},
      // 80 tokens: the split runs to the document start at 85.
      {100, 80, 0, {{"p_train_000001.bin", 100}, {"p_train_000002.bin", 100},
                    {"p_train_000003.bin", 76}, {"p_val_000000.bin", 85}}},
      // Val larger than a shard: its shards end at the document starts at
      // 75 and 155, and the split at 160.
      {50, 160, 0, {{"p_train_000003.bin", 50}, {"p_train_000004.bin", 50},
                    {"p_train_000005.bin", 50}, {"p_train_000006.bin", 50},
                    {"p_train_000007.bin", 1}, {"p_val_000000.bin", 75},
                    {"p_val_000001.bin", 80}, {"p_val_000002.bin", 5}}},
      // Three documents.
      {1000, 0, 3, {{"p_train_000001.bin", 276}, {"p_val_000000.bin", 85}}},
      // Exactly at a document start: 75 tokens are the first two documents.
      {1000, 75, 0, {{"p_train_000001.bin", 286}, {"p_val_000000.bin", 75}}},
  };
  for (const Case &c : cases)
    for (size_t chunk : {size_t(1), size_t(7), size_t(1000)}) {
      std::string dir = freshDir("shards-layout");
      ShardOptions o;
      o.prefix = dir + "/p";
      o.shardTokens = c.shard;
      o.valTokens = c.valTokens;
      o.valDocuments = c.valDocs;
      ShardedTokenWriter w(o);
      std::vector<std::string> reported;
      w.onShard([&](const ShardedTokenWriter::Shard &sh) { reported.push_back(sh.path); });
      ASSERT_TRUE(writeInChunks(w, s, chunk));
      EXPECT_EQ(shardsIn(dir), c.expected) << "shard " << c.shard << " val " << c.valTokens
                                           << "/" << c.valDocs << " chunk " << chunk;
      EXPECT_EQ(reported.size(), c.expected.size());
      EXPECT_EQ(w.valTokens() + w.trainTokens(), s.ids.size());
      expectConcatenation(dir, s);
      // The shards read back as one dataset with the same tokens.
      StatusOr<Dataset> d = Dataset::open(dir + "/p_train_*.bin");
      ASSERT_TRUE(d) << d.status().message();
      EXPECT_EQ(d->size(), w.trainTokens());
    }
}

// Verify that discard() removes every committed shard and that a split
// holding everything is an error.
TEST(TokenShardsTest, AllValidationIsAnErrorAndDiscardRemoves) {
  std::string dir = freshDir("shards-all-val");
  ShardOptions o;
  o.prefix = dir + "/p";
  o.shardTokens = 50;
  o.valTokens = 1000;
  ShardedTokenWriter w(o);
  Status st = writeInChunks(w, documents({30, 45, 10}), 13);
  ASSERT_FALSE(st);
  EXPECT_EQ(st.message(), "all 85 tokens (3 documents) went to the validation split, none to "
                          "training: ask for a smaller split");
  EXPECT_EQ(listDir(dir).size(), 2u);
  w.discard();
  EXPECT_TRUE(listDir(dir).empty());
}

} // namespace

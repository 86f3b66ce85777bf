//===- DatasetTest.cpp - sharded, memory-mapped token datasets ------------===//

#include "DataTestUtils.h"

#include "runtime/data/BatchStage.h"
#include "runtime/data/DataLoader.h"
#include "runtime/data/Dataset.h"
#include "runtime/data/TokenFile.h"
#include "runtime/support/Hash64.h"

#include <filesystem>
#include <fstream>
#include <numeric>
#include <set>

using namespace gptc;
using namespace gptc::data;
using gptc::data::testing::tempPath;
namespace fs = std::filesystem;

namespace {

/// Tokens first, first+1, ...: a token's value is its index in the dataset.
std::vector<int32_t> iota(int32_t first, int32_t n) {
  std::vector<int32_t> t(n);
  std::iota(t.begin(), t.end(), first);
  return t;
}

/// A fresh directory holding shards of `sizes` tokens named shard_00.bin,
/// shard_01.bin, ... (written last to first, so that directory order is not
/// the name order), numbering the tokens across them.
std::string writeShards(const std::string &name, const std::vector<int32_t> &sizes) {
  std::string dir = tempPath(name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::vector<int32_t> firsts(sizes.size(), 0);
  for (size_t i = 1; i < sizes.size(); ++i)
    firsts[i] = firsts[i - 1] + sizes[i - 1];
  for (size_t i = sizes.size(); i-- > 0;) {
    char file[32];
    std::snprintf(file, sizeof(file), "/shard_%02zu.bin", i);
    EXPECT_TRUE(writeTokenFile(dir + file, iota(firsts[i], sizes[i])));
  }
  return dir;
}

DataLoaderOptions opts(int64_t b, int64_t t, bool shuffle = false, uint64_t seed = 0,
                       int64_t rank = 0, int64_t world = 1) {
  DataLoaderOptions o;
  o.batchSize = b, o.seqLen = t, o.shuffle = shuffle, o.seed = seed;
  o.rank = rank, o.worldSize = world;
  return o;
}

DataLoader open(const std::string &spec, DataLoaderOptions o, int64_t vocab = 0) {
  StatusOr<DataLoader> loader = DataLoader::open(spec, o, vocab);
  EXPECT_TRUE(loader) << loader.status().message();
  return std::move(*loader);
}

/// The next `n` batches' inputs and targets, one after the other.
std::vector<int32_t> batches(DataLoader &loader, int n) {
  std::vector<int32_t> out, x, y;
  for (int i = 0; i < n; ++i) {
    loader.next(x, y);
    out.insert(out.end(), x.begin(), x.end());
    out.insert(out.end(), y.begin(), y.end());
  }
  return out;
}

std::string openError(const std::string &spec) {
  StatusOr<Dataset> d = Dataset::open(spec);
  EXPECT_FALSE(d) << spec;
  return d ? "" : d.status().message();
}

// Verify that a directory of shards reads exactly as the file holding their
// concatenation, windows spanning shard boundaries included, in either order.
TEST(DatasetTest, DirectoryReadsAsTheConcatenation) {
  std::string dir = writeShards("concat", {37, 50, 24});
  std::string whole = tempPath("concat_whole.bin");
  ASSERT_TRUE(writeTokenFile(whole, iota(0, 111)));
  StatusOr<Dataset> d = Dataset::open(dir);
  ASSERT_TRUE(d) << d.status().message();
  ASSERT_EQ(d->shards().size(), 3u);
  EXPECT_EQ(d->size(), 111u);
  EXPECT_EQ(d->shards()[0].path, dir + "/shard_00.bin");
  EXPECT_EQ(d->shards()[2].first, 87u);
  std::vector<int32_t> span(20);
  ASSERT_TRUE(d->read(30, 20, span.data())); // shard 0 into shard 1
  EXPECT_EQ(span, iota(30, 20));
  std::vector<int32_t> all(111);
  ASSERT_TRUE(d->read(0, 111, all.data()));
  EXPECT_EQ(all, iota(0, 111));
  EXPECT_FALSE(d->read(100, 12, all.data()));

  for (bool shuffle : {false, true}) {
    DataLoader shards = open(dir, opts(2, 4, shuffle, 3));
    DataLoader file = open(whole, opts(2, 4, shuffle, 3));
    EXPECT_EQ(shards.stepsPerEpoch(), 13);
    EXPECT_EQ(batches(shards, 30), batches(file, 30)) << "shuffle " << shuffle;
  }
}

// Verify that a folder of llm.c-style shards holding the validation shard
// beside the training ones is refused, naming the globs to use, while the
// training glob reads the training shards alone.
TEST(DatasetTest, FolderWithTrainAndValShardsIsRefused) {
  std::string dir = tempPath("trainval");
  fs::remove_all(dir);
  fs::create_directories(dir);
  ASSERT_TRUE(writeTokenFile(dir + "/wiki_val_000000.bin", iota(0, 10)));
  ASSERT_TRUE(writeTokenFile(dir + "/wiki_train_000001.bin", iota(10, 20)));
  ASSERT_TRUE(writeTokenFile(dir + "/wiki_train_000002.bin", iota(30, 20)));
  std::string error = openError(dir);
  EXPECT_NE(error.find("holds training and validation shards"), std::string::npos) << error;
  EXPECT_NE(error.find("--data '" + dir + "/wiki_train_*.bin' --val '" + dir +
                       "/wiki_val_*.bin'"),
            std::string::npos)
      << error;
  StatusOr<Dataset> train = Dataset::open(dir + "/wiki_train_*.bin");
  ASSERT_TRUE(train) << train.status().message();
  EXPECT_EQ(train->size(), 40u);
}

// Verify that a quoted glob is expanded here, in name order, and only what
// it matches is read.
TEST(DatasetTest, Glob) {
  std::string dir = writeShards("glob", {10, 20, 30});
  ASSERT_TRUE(writeTokenFile(dir + "/other_00.bin", iota(0, 5)));
  StatusOr<Dataset> d = Dataset::open(dir + "/shard_*.bin");
  ASSERT_TRUE(d) << d.status().message();
  ASSERT_EQ(d->shards().size(), 3u);
  EXPECT_EQ(d->shards()[1].path, dir + "/shard_01.bin");
  std::vector<int32_t> all(60);
  ASSERT_TRUE(d->read(0, 60, all.data()));
  EXPECT_EQ(all, iota(0, 60));
  // The directory takes every *.bin: other_00.bin sorts first.
  StatusOr<Dataset> everything = Dataset::open(dir);
  ASSERT_TRUE(everything);
  EXPECT_EQ(everything->size(), 65u);
  EXPECT_EQ(everything->shards()[0].path, dir + "/other_00.bin");
}

TEST(DatasetTest, NothingToRead) {
  std::string empty = tempPath("empty_dir");
  fs::create_directories(empty);
  EXPECT_EQ(openError(empty), empty + ": a directory with no token files (*.bin)");
  EXPECT_EQ(openError(empty + "/train_*.bin"),
            empty + "/train_*.bin: no file matches the pattern");
  EXPECT_EQ(openError(empty + "/missing.bin"), empty + "/missing.bin: No such file or directory");
  // A directory named like a shard is not one.
  fs::create_directories(empty + "/odd.bin");
  EXPECT_EQ(openError(empty), empty + "/odd.bin: is not a regular file");
}

// Verify that every shard's header is checked when the dataset opens, and
// the error names the shard.
TEST(DatasetTest, BadShardsAreNamed) {
  std::string dir = writeShards("truncated", {10, 20, 30});
  std::string shard = dir + "/shard_01.bin";
  fs::resize_file(shard, fs::file_size(shard) - 1);
  EXPECT_EQ(openError(dir),
            shard + ": the header says 20 tokens (1064 bytes) but the file has 1063 bytes");

  dir = writeShards("magic", {10, 20, 30});
  shard = dir + "/shard_02.bin";
  {
    std::FILE *f = std::fopen(shard.c_str(), "r+b");
    ASSERT_TRUE(f);
    const char llama[4] = {char(0xA1), char(0xD9), char(0x34), char(0x01)}; // 20240801
    std::fwrite(llama, 1, 4, f);
    std::fclose(f);
  }
  EXPECT_EQ(openError(dir), shard + ": bad magic 20240801, expected 20240520 (llm.c GPT-2 "
                                     "token file); this is a llama-3 token file (uint32 tokens), "
                                     "not a GPT-2 one");
}

// Verify that an id outside the vocabulary is found as its window is read,
// with its file and index in that file, and never reaches a step.
TEST(DatasetTest, VocabularyIsCheckedPerWindow) {
  std::string dir = writeShards("vocab", {40, 40});
  StatusOr<Dataset> d = Dataset::open(dir);
  ASSERT_TRUE(d);
  StatusOr<DataLoader> loader = DataLoader::create(std::move(*d), opts(1, 8), /*vocabSize=*/50);
  ASSERT_TRUE(loader) << loader.status().message();
  std::vector<int32_t> x, y;
  for (int i = 0; i < 5; ++i) // tokens 0..40
    loader->next(x, y);
  EXPECT_TRUE(loader->status()) << loader->status().message();
  loader->next(x, y); // 40..48, all in shard 1 and below 50
  EXPECT_TRUE(loader->status());
  loader->next(x, y); // 48..56: token 50 is index 10 of shard 1
  ASSERT_FALSE(loader->status());
  EXPECT_EQ(loader->status().message(),
            dir + "/shard_01.bin: token 50 at index 10 is outside the vocabulary (size 50)");

  StatusOr<Dataset> again = Dataset::open(dir);
  ASSERT_TRUE(again);
  StatusOr<DataLoader> staged = DataLoader::create(std::move(*again), opts(1, 8), 50);
  ASSERT_TRUE(staged);
  staged->seek(5);
  StatusOr<std::unique_ptr<BatchStage>> stage = BatchStage::create(*staged, 1);
  ASSERT_TRUE(stage);
  StatusOr<BatchStage::Batch> ok = (*stage)->acquire();
  ASSERT_TRUE(ok) << ok.status().message();
  ASSERT_TRUE((*stage)->release(ok->slot));
  StatusOr<BatchStage::Batch> bad = (*stage)->acquire();
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.status().message().find("shard_01.bin: token 50"), std::string::npos);

  // Small datasets are checked whole when they open.
  StatusOr<DataLoader> eager = DataLoader::open(dir, opts(1, 8), 50);
  ASSERT_FALSE(eager);
  EXPECT_EQ(eager.status().message(),
            dir + "/shard_01.bin: token 50 at index 10 is outside the vocabulary (size 50)");
}

// Verify that seeking to a position mid-shard restores the exact stream.
TEST(DatasetTest, ResumeMidShard) {
  std::string dir = writeShards("resume", {100, 150, 61});
  for (bool shuffle : {false, true}) {
    DataLoader a = open(dir, opts(2, 5, shuffle, 11));
    ASSERT_EQ(a.stepsPerEpoch(), 31);
    std::vector<int32_t> stream = batches(a, 70);
    const size_t perBatch = 2 * 10;
    for (uint64_t at : {13u, 20u, 31u, 45u}) { // 13: token 130, inside shard 1
      DataLoader b = open(dir, opts(2, 5, shuffle, 11));
      b.seek(at);
      EXPECT_EQ(batches(b, 10), std::vector<int32_t>(stream.begin() + at * perBatch,
                                                     stream.begin() + (at + 10) * perBatch))
          << "shuffle " << shuffle << " at " << at;
    }
  }
}

// Verify that two ranks read disjoint windows that together cover the epoch.
TEST(DatasetTest, RanksAreDisjoint) {
  std::string dir = writeShards("ranks", {64, 64, 65});
  for (bool shuffle : {false, true}) {
    std::set<int32_t> seen;
    for (int64_t rank = 0; rank < 2; ++rank) {
      DataLoader loader = open(dir, opts(2, 4, shuffle, 9, rank, 2));
      ASSERT_EQ(loader.stepsPerEpoch(), 12);
      std::vector<int32_t> x, y;
      for (int i = 0; i < 12; ++i) {
        loader.next(x, y);
        for (int32_t t : x)
          EXPECT_TRUE(seen.insert(t).second) << "token " << t << " read by two ranks";
      }
    }
    EXPECT_EQ(seen.size(), 192u); // every input token of the epoch, once
  }
}

// Verify what checkpoints record: one file keeps the hash of its tokens; a
// set of shards hashes names, counts and samples.
TEST(DatasetTest, Identity) {
  std::string whole = tempPath("identity.bin");
  ASSERT_TRUE(writeTokenFile(whole, iota(5, 1000)));
  StatusOr<Dataset> one = Dataset::open(whole);
  ASSERT_TRUE(one);
  std::vector<uint16_t> tokens(1000);
  std::iota(tokens.begin(), tokens.end(), uint16_t(5));
  Hash64 h;
  h.update(tokens.data(), tokens.size() * 2);
  EXPECT_EQ(one->identity(), h.value());
  EXPECT_EQ(Dataset::fromTokens(tokens).identity(), h.value());

  std::string a = writeShards("identity_a", {10, 20}), b = writeShards("identity_b", {10, 20});
  StatusOr<Dataset> da = Dataset::open(a), db = Dataset::open(b);
  ASSERT_TRUE(da && db);
  EXPECT_EQ(da->identity(), db->identity()); // the same names and tokens
  std::string c = writeShards("identity_c", {11, 19});
  StatusOr<Dataset> dc = Dataset::open(c);
  ASSERT_TRUE(dc);
  EXPECT_NE(da->identity(), dc->identity());
}

/// This process's resident file-backed memory (RssFile in /proc/self/status),
/// in bytes; 0 where /proc does not say.
uint64_t residentFileBytes() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line))
    if (line.rfind("RssFile:", 0) == 0)
      return std::stoull(line.substr(8)) * 1024;
  return 0;
}

// Verify that the full scans (the vocabulary check at open, and a single
// shard's identity hash) leave the mapping out of the resident set: a
// 64 MiB token file adds less than 4 MiB to it afterwards.
TEST(DatasetTest, FullScansDoNotStayResident) {
  std::string path = tempPath("resident.bin");
  std::vector<int32_t> ids(size_t(32) << 20);
  for (size_t i = 0; i < ids.size(); ++i)
    ids[i] = int32_t(i % 50000);
  ASSERT_TRUE(writeTokenFile(path, ids));
  ids = {};
  StatusOr<Dataset> d = Dataset::open(path);
  ASSERT_TRUE(d);
  uint64_t before = residentFileBytes();
  if (before == 0)
    GTEST_SKIP() << "no RssFile in /proc/self/status";
  EXPECT_TRUE(d->checkVocabulary(50257));
  EXPECT_NE(d->identity(), 0u);
  uint64_t after = residentFileBytes();
  EXPECT_LT(after, before + (uint64_t(4) << 20)) << before << " -> " << after << " bytes";
  // The tokens read after a release are the file's.
  std::vector<int32_t> window(3);
  ASSERT_TRUE(d->read((uint64_t(32) << 20) - 3, 3, window.data()));
  EXPECT_EQ(window, (std::vector<int32_t>{int32_t(((32 << 20) - 3) % 50000),
                                          int32_t(((32 << 20) - 2) % 50000),
                                          int32_t(((32 << 20) - 1) % 50000)}));
  fs::remove(path);
}

} // namespace

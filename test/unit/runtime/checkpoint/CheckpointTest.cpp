//===- CheckpointTest.cpp - checkpoint format, IO, identity, directory ----===//

#include "runtime/checkpoint/Checkpoint.h"
#include "runtime/executor/HostBackend.h"
#include "runtime/executor/Session.h"
#include "runtime/support/FileIO.h"
#include "runtime/support/Hash64.h"
#include "test/unit/ScratchDir.h"
#include "test/unit/runtime/ExecutableBuilder.h"

#include <gtest/gtest.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <sys/resource.h>
#include <unistd.h>

using namespace gptc;
using namespace gptc::testing;

namespace {

namespace fs = std::filesystem;

/// A model with one parameter w (n floats) and its moment, plus a (B, T)
/// input.
ExecutableSpec model(int64_t n, const std::string &name = "tiny", int64_t batch = 2,
                     int64_t seq = 4, int64_t heads = 1) {
  ExecutableSpec e;
  e.modelName = name;
  e.config = {{"n_layer", 1}, {"n_embd", n}, {"n_head", heads}, {"batch", batch},
              {"seq", seq}, {"world_size", 0}};
  uint32_t params = e.addPool("params", 4096), state = e.addPool("state", 4096);
  uint32_t inputs = e.addPool("inputs", 256);
  e.addTensor("w", s::TensorRole::Parameter, s::DType::F32, {n}, params, 0);
  e.addTensor("w.adam_m", s::TensorRole::OptimizerState, s::DType::F32, {n}, state, 0);
  e.addTensor("tokens", s::TensorRole::Input, s::DType::I32, {batch, seq}, inputs, 0);
  return e;
}

std::unique_ptr<Session> open(const ExecutableSpec &spec) {
  auto exe = Executable::loadBytes(spec.build(), "test.fb");
  EXPECT_TRUE(exe) << exe.status().message();
  auto session = Session::create(std::move(*exe), createHostBackend);
  EXPECT_TRUE(session) << session.status().message();
  return std::move(*session);
}

checkpoint::Checkpoint sample(size_t bytes = 64) {
  checkpoint::Checkpoint c;
  c.identity = 0x1234;
  c.model = "model 'x'";
  c.step = 7;
  c.dataPosition = 14;
  c.seed = 1337;
  c.dataSeed = 9;
  c.dataTokens = 1000;
  c.dataHash = 0xfeedbeef;
  c.dataStepTokens = 256;
  c.optimizer = {{"lr", 1e-3}, {"schedule", 1}, {"total_steps", 100}};
  checkpoint::Tensor t;
  t.name = "w";
  t.shape = {int64_t(bytes / 4)};
  for (size_t i = 0; i < bytes; ++i)
    t.bytes.push_back(uint8_t(i * 7 + 1));
  c.tensors.push_back(t);
  t.name = "w.adam_m";
  t.role = s::TensorRole::OptimizerState;
  c.tensors.push_back(t);
  return c;
}

class CheckpointTest : public ::testing::Test {
protected:
  std::string path(const std::string &name) const { return (dir / name).string(); }
  std::vector<std::string> files() const {
    std::vector<std::string> out;
    for (const auto &e : fs::directory_iterator(dir))
      out.push_back(e.path().filename().string());
    std::sort(out.begin(), out.end());
    return out;
  }
  ScratchDir scratch{"ckpt-test"};
  fs::path dir = scratch.path();
};

// Verify that every field survives a write and a read.
TEST_F(CheckpointTest, RoundTrips) {
  checkpoint::Checkpoint c = sample();
  ASSERT_TRUE(checkpoint::writeCheckpoint(path("a.ckpt"), c));
  auto r = checkpoint::readCheckpoint(path("a.ckpt"));
  ASSERT_TRUE(r) << r.status().message();
  EXPECT_EQ(r->identity, c.identity);
  EXPECT_EQ(r->model, c.model);
  EXPECT_EQ(r->step, 7);
  EXPECT_EQ(r->dataPosition, 14u);
  EXPECT_EQ(r->seed, 1337u);
  EXPECT_EQ(r->dataSeed, 9u);
  EXPECT_EQ(r->dataTokens, 1000u);
  EXPECT_EQ(r->dataHash, 0xfeedbeefu);
  EXPECT_EQ(r->version, checkpoint::kFormatVersion);
  EXPECT_EQ(r->dataStepTokens, 256u);
  ASSERT_EQ(r->optimizer.size(), 3u);
  EXPECT_EQ(r->optimizer[1].key, "schedule");
  EXPECT_EQ(r->optimizer[2].value, 100.0);
  ASSERT_EQ(r->tensors.size(), 2u);
  EXPECT_EQ(r->tensors[1].name, "w.adam_m");
  EXPECT_EQ(r->tensors[1].role, s::TensorRole::OptimizerState);
  EXPECT_EQ(r->tensors[1].shape, std::vector<int64_t>{16});
  EXPECT_EQ(r->tensors[1].bytes, c.tensors[1].bytes);
  EXPECT_EQ(files(), std::vector<std::string>{"a.ckpt"}) << "no temporary left behind";
}

// Verify that format 1 (before the data's token count and hash) still
// reads, with the data unknown (0, 0).
TEST_F(CheckpointTest, ReadsFormatOne) {
  std::string bytes = "GPTCCKPT";
  auto pod = [&](auto v) { bytes.append(reinterpret_cast<const char *>(&v), sizeof(v)); };
  auto str = [&](const std::string &v) {
    pod(uint32_t(v.size()));
    bytes += v;
  };
  pod(uint32_t(1));           // version
  pod(uint64_t(0x1234));      // identity
  pod(int64_t(7));            // step
  pod(uint64_t(14));          // data position
  pod(uint64_t(1337));        // init seed
  pod(uint64_t(9));           // data seed
  str("model 'x'");
  pod(uint32_t(1));           // tensors
  str("w");
  pod(uint8_t(s::TensorRole::Parameter));
  pod(uint8_t(s::DType::F32));
  pod(uint32_t(1));
  pod(int64_t(1));
  pod(uint64_t(4));
  pod(1.5f);
  Hash64 h;
  h.update(bytes.data(), bytes.size());
  pod(h.value());
  std::ofstream(path("v1.ckpt"), std::ios::binary) << bytes;
  auto r = checkpoint::readCheckpoint(path("v1.ckpt"));
  ASSERT_TRUE(r) << r.status().message();
  EXPECT_EQ(r->step, 7);
  EXPECT_EQ(r->dataSeed, 9u);
  EXPECT_EQ(r->dataTokens, 0u);
  EXPECT_EQ(r->dataHash, 0u);
  EXPECT_EQ(r->version, 1u);
  EXPECT_EQ(r->dataStepTokens, 0u) << "unknown before format 3";
  EXPECT_TRUE(r->optimizer.empty());
  ASSERT_EQ(r->tensors.size(), 1u);
  EXPECT_EQ(r->tensors[0].bytes.size(), 4u);
}

// Verify that a flipped byte anywhere, a truncation, a foreign file, a
// missing file, a directory and a negative step are refused with a message
// naming the file.
TEST_F(CheckpointTest, RefusesCorruptTruncatedAndForeignFiles) {
  ASSERT_TRUE(checkpoint::writeCheckpoint(path("a.ckpt"), sample()));
  std::string bytes;
  {
    std::ifstream in(path("a.ckpt"), std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  auto writeRaw = [&](const std::string &name, const std::string &data) {
    std::ofstream(path(name), std::ios::binary) << data;
    return path(name);
  };
  for (size_t at : {size_t(20), bytes.size() / 2, bytes.size() - 9}) {
    std::string bad = bytes;
    bad[at] ^= 0x10;
    auto r = checkpoint::readCheckpoint(writeRaw("flip.ckpt", bad));
    ASSERT_FALSE(r) << "byte " << at;
    EXPECT_EQ(r.status().message(), path("flip.ckpt") +
                                        ": checksum mismatch: the checkpoint is "
                                        "truncated or corrupt (" +
                                        std::to_string(bytes.size()) + " bytes)");
  }
  auto r = checkpoint::readCheckpoint(writeRaw("cut.ckpt", bytes.substr(0, bytes.size() - 30)));
  ASSERT_FALSE(r);
  EXPECT_NE(r.status().message().find("truncated or corrupt"), std::string::npos);
  r = checkpoint::readCheckpoint(writeRaw("short.ckpt", bytes.substr(0, 10)));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.status().message(), path("short.ckpt") + ": truncated checkpoint (10 bytes)");
  r = checkpoint::readCheckpoint(writeRaw("other.ckpt", "GPTX not a checkpoint"));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.status().message(),
            path("other.ckpt") + ": not a gptc checkpoint (no GPTCCKPT magic)");
  r = checkpoint::readCheckpoint(path("missing.ckpt"));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.status().message(),
            path("missing.ckpt") + ": cannot open: No such file or directory");
  r = checkpoint::readCheckpoint(dir.string());
  ASSERT_FALSE(r);
  EXPECT_EQ(r.status().message(), dir.string() + ": is a directory, not a checkpoint file");
  // Well-formed, checksum and all, but a step no run reaches (the trainer
  // would index its per-step buffers with it).
  checkpoint::Checkpoint negative = sample();
  negative.step = -5;
  ASSERT_TRUE(checkpoint::writeCheckpoint(path("negative.ckpt"), negative));
  r = checkpoint::readCheckpoint(path("negative.ckpt"));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.status().message(), path("negative.ckpt") + ": negative step -5");
}

// Verify atomicity: a write that fails halfway (the file-size limit stops
// it) leaves the previous checkpoint intact and no partial or temporary file.
TEST_F(CheckpointTest, FailedWriteLeavesNoPartialFile) {
  checkpoint::Checkpoint old = sample(64);
  ASSERT_TRUE(checkpoint::writeCheckpoint(path("a.ckpt"), old));
  auto oldSize = fs::file_size(path("a.ckpt"));

  rlimit saved;
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &saved), 0);
  auto *oldHandler = std::signal(SIGXFSZ, SIG_IGN); // write() fails with EFBIG instead
  rlimit small = saved;
  small.rlim_cur = 4096;
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &small), 0);
  Status s = checkpoint::writeCheckpoint(path("a.ckpt"), sample(1 << 20));
  ::setrlimit(RLIMIT_FSIZE, &saved);
  std::signal(SIGXFSZ, oldHandler);

  ASSERT_FALSE(s);
  EXPECT_NE(s.message().find(path("a.ckpt") + ": write failed: File too large"), std::string::npos)
      << s.message();
  EXPECT_EQ(files(), std::vector<std::string>{"a.ckpt"});
  EXPECT_EQ(fs::file_size(path("a.ckpt")), oldSize);
  auto r = checkpoint::readCheckpoint(path("a.ckpt"));
  ASSERT_TRUE(r) << r.status().message();
  EXPECT_EQ(r->tensors[0].bytes, old.tensors[0].bytes);

  s = checkpoint::writeCheckpoint(path("no/such/dir/a.ckpt"), old);
  ASSERT_FALSE(s);
  EXPECT_NE(s.message().find("cannot create a temporary file in " + path("no/such/dir")),
            std::string::npos)
      << s.message();
}

// Verify that a (sparse) file larger than memory is refused before it is
// read: the read-whole allocation aborted the process.
TEST_F(CheckpointTest, RefusesAFileLargerThanMemory) {
  std::string big = path("big.ckpt");
  { std::ofstream(big, std::ios::binary) << "GPTCCKPT"; }
  fs::resize_file(big, defaultMaxReadBytes() + 1);
  auto r = checkpoint::readCheckpoint(big);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.status().message(), big + ": " + std::to_string(defaultMaxReadBytes() + 1) +
                                      " bytes, more than this machine's memory: not a checkpoint");
}

// Verify that a checkpoint holding a NaN or an infinity in any float
// dtype is refused, naming the tensor and element, and the file it would
// replace survives: resuming from it could only fail.
TEST_F(CheckpointTest, RefusesNonFiniteValues) {
  ASSERT_TRUE(checkpoint::writeCheckpoint(path("a.ckpt"), sample()));
  struct Case {
    s::DType dtype;
    size_t tensor, element;
    std::vector<uint8_t> value; // little-endian bits
    const char *expected;
  } cases[] = {
      {s::DType::F32, 0, 3, {0x00, 0x00, 0xc0, 0x7f}, "parameter 'w' holds a non-finite value at element 3 (nan)"},
      {s::DType::F32, 1, 0, {0x00, 0x00, 0x80, 0xff}, "optimizer state 'w.adam_m' holds a non-finite value at element 0 (-inf)"},
      {s::DType::BF16, 1, 5, {0x80, 0x7f}, "optimizer state 'w.adam_m' holds a non-finite value at element 5"},
      {s::DType::F16, 0, 31, {0x01, 0x7c}, "parameter 'w' holds a non-finite value at element 31"},
      {s::DType::F64, 0, 7, {0, 0, 0, 0, 0, 0, 0xf0, 0x7f}, "parameter 'w' holds a non-finite value at element 7"},
  };
  for (const Case &k : cases) {
    checkpoint::Checkpoint c = sample();
    for (checkpoint::Tensor &t : c.tensors) {
      t.dtype = k.dtype;
      std::fill(t.bytes.begin(), t.bytes.end(), 0); // finite in every dtype
    }
    ASSERT_TRUE(checkpoint::checkFinite(c));
    std::copy(k.value.begin(), k.value.end(),
              c.tensors[k.tensor].bytes.begin() + k.element * k.value.size());
    Status s = checkpoint::writeCheckpoint(path("a.ckpt"), c);
    ASSERT_FALSE(s);
    EXPECT_EQ(s.message(), path("a.ckpt") + ": not written: " + k.expected) << s.message();
  }
  EXPECT_EQ(files(), std::vector<std::string>{"a.ckpt"});
  auto r = checkpoint::readCheckpoint(path("a.ckpt"));
  ASSERT_TRUE(r) << r.status().message();
  EXPECT_EQ(r->tensors[0].bytes, sample().tensors[0].bytes);
}

// Verify listing by step (ignoring temporaries and other files), latest,
// and keep-last-K.
TEST_F(CheckpointTest, ListsFindsLatestAndPrunes) {
  EXPECT_EQ(checkpoint::fileName(40), "step-00000040.ckpt");
  auto none = checkpoint::latest(dir.string());
  ASSERT_FALSE(none);
  EXPECT_EQ(none.status().message(), dir.string() + ": no checkpoint (step-N.ckpt) to resume from");
  for (int64_t step : {30, 5, 100, 20})
    ASSERT_TRUE(checkpoint::writeCheckpoint(path(checkpoint::fileName(step)), sample()));
  std::ofstream(path("step-00000200.ckpt.tmp-abc123")) << "partial";
  std::ofstream(path("notes.txt")) << "x";
  auto all = checkpoint::list(dir.string());
  ASSERT_TRUE(all);
  std::vector<int64_t> steps;
  for (const auto &e : *all)
    steps.push_back(e.step);
  EXPECT_EQ(steps, (std::vector<int64_t>{5, 20, 30, 100}));
  auto last = checkpoint::latest(dir.string());
  ASSERT_TRUE(last);
  EXPECT_EQ(*last, path("step-00000100.ckpt"));

  // Just wrote step 30: step 100 (another run's, or a branch's) is not
  // counted against the 2 kept, nor deleted.
  ASSERT_TRUE(checkpoint::prune(dir.string(), 2, 30));
  EXPECT_EQ(files(), (std::vector<std::string>{"notes.txt", "step-00000020.ckpt",
                                               "step-00000030.ckpt", "step-00000100.ckpt",
                                               "step-00000200.ckpt.tmp-abc123"}));
  ASSERT_TRUE(checkpoint::prune(dir.string(), 2, 100));
  EXPECT_EQ(files(),
            (std::vector<std::string>{"notes.txt", "step-00000030.ckpt", "step-00000100.ckpt",
                                      "step-00000200.ckpt.tmp-abc123"}));
  EXPECT_FALSE(checkpoint::list(path("missing")));
}

// Verify the identity is the architecture's: the same model built twice,
// renamed, or with another batch, T or rank count agrees; another size or
// head count differs, and restore refuses it naming both models.
TEST_F(CheckpointTest, IdentityRefusesAnotherModel) {
  auto a = open(model(4)), again = open(model(4)), wider = open(model(8)),
       renamed = open(model(4, "other")), otherHeads = open(model(4, "tiny", 2, 4, 2));
  uint64_t id = checkpoint::executableIdentity(a->schema());
  EXPECT_EQ(id, checkpoint::executableIdentity(again->schema()));
  EXPECT_EQ(id, checkpoint::executableIdentity(renamed->schema()));
  EXPECT_NE(id, checkpoint::executableIdentity(wider->schema()));
  EXPECT_NE(id, checkpoint::executableIdentity(otherHeads->schema()));

  std::vector<float> w = {1, 2, 3, 4}, m = {5, 6, 7, 8};
  ASSERT_TRUE(a->writeTensor(0, w.data(), 16));
  ASSERT_TRUE(a->writeTensor(1, m.data(), 16));
  auto c = checkpoint::capture(*a);
  ASSERT_TRUE(c) << c.status().message();
  ASSERT_EQ(c->tensors.size(), 2u) << "parameters and state only, not inputs";

  Status s = checkpoint::restore(*wider, *c, "a.ckpt");
  ASSERT_FALSE(s);
  EXPECT_EQ(s.message(),
            "a.ckpt is a checkpoint of model 'tiny' (n_layer=1, n_embd=4, n_head=1, batch=2, "
            "seq=4, world_size=0), 1 parameter and 1 state tensors, but the executable is model "
            "'tiny' (n_layer=1, n_embd=8, n_head=1, batch=2, seq=4, world_size=0), 1 parameter "
            "and 1 state tensors; use an executable of that model (any batch or T)");

  ASSERT_TRUE(checkpoint::restore(*again, *c, "a.ckpt"));
  std::vector<float> got(4);
  ASSERT_TRUE(again->readTensor(0, got.data(), 16));
  EXPECT_EQ(got, w);
  ASSERT_TRUE(again->readTensor(1, got.data(), 16));
  EXPECT_EQ(got, m);

  // A sampler with B=1 and another T reads the B=2 checkpoint.
  auto sampler = open(model(4, "tiny", 1, 3));
  ASSERT_TRUE(checkpoint::restore(*sampler, *c, "a.ckpt"));
  ASSERT_TRUE(sampler->readTensor(0, got.data(), 16));
  EXPECT_EQ(got, w);

  // A format 2 file's identity also hashed the name, B and T: the same
  // executable reads it, another batch is refused, naming the format.
  checkpoint::Checkpoint old = *c;
  old.version = 2;
  old.identity = checkpoint::executableIdentity(a->schema(), 2);
  EXPECT_NE(old.identity, id);
  EXPECT_TRUE(checkpoint::restore(*again, old, "old.ckpt"));
  s = checkpoint::restore(*sampler, old, "old.ckpt");
  ASSERT_FALSE(s);
  EXPECT_NE(s.message().find("; a format 2 checkpoint needs the executable's model, batch and T"),
            std::string::npos)
      << s.message();

  // A checkpoint that claims the identity but lacks a tensor.
  c->tensors.pop_back();
  s = checkpoint::restore(*again, *c, "a.ckpt");
  ASSERT_FALSE(s);
  EXPECT_EQ(s.message(), "a.ckpt: no tensor 'w.adam_m'");
}

} // namespace

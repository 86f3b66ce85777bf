//===- SampleTest.cpp - gptrun --sample on the host target ----------------===//
//
// Compiles `mini` (GPT-2's vocabulary) for the Host target with T=16,
// trains a few steps with gptrun's Trainer into a checkpoint directory,
// then samples from the latest checkpoint: N tokens past the prompt (the
// window slides, since the prompt plus N is longer than T), the same text
// for the same seed, other text for another seed, and errors for prompts
// that do not fit.
//
//===----------------------------------------------------------------------===//

#include "ScratchDir.h"
#include "TestUtils.h"

#include "compiler/Codegen/EmitExecutable.h"
#include "runtime/checkpoint/Checkpoint.h"
#include "runtime/data/TokenFile.h"
#include "runtime/data/Tokenizer.h"
#include "runtime/executor/OpenSession.h"
#include "tools/gptrun/Generate.h"
#include "tools/gptrun/Trainer.h"

#include <cstdio>
#include <filesystem>
#include <fstream>

using namespace gptc;
using namespace gptc::testing;

namespace {

namespace fs = std::filesystem;

constexpr int64_t kSeq = 16, kTokens = 24;
const char *const kPrompt = "It is a truth universally acknowledged";

class SampleTest : public GPT2Test {
protected:

  /// step.fb of `mini` (B=2, T=16) and 3 trained steps in dir/ckpt.
  void trainCheckpoint() {
    ASSERT_TRUE(compile("mini", Phase::MemoryPlan, [](CompileOptions &o) {
      o.batch = 2;
      o.seq = kSeq;
      o.lr = 1e-3;
    })) << diagnostics;
    codegen::EmitOptions emit;
    emit.target = codegen::EmitOptions::Target::Host;
    auto bytes = codegen::emitExecutable(*module, emit);
    ASSERT_TRUE(mlir::succeeded(bytes)) << diagnostics;
    exe = (dir / "mini.fb").string();
    std::ofstream(exe, std::ios::binary)
        .write(reinterpret_cast<const char *>(bytes->data()), std::streamsize(bytes->size()));

    auto tokenizer = data::Tokenizer::load(GPTC_DATA_DIR "/gpt2");
    ASSERT_TRUE(tokenizer) << tokenizer.status().message();
    std::vector<int32_t> text;
    for (int i = 0; i < 20; ++i)
      tokenizer->encodeDocument("It is a truth universally acknowledged, that a single man in "
                                "possession of a good fortune, must be in want of a wife.",
                                text);
    std::string train = (dir / "train.bin").string();
    ASSERT_TRUE(data::writeTokenFile(train, text));

    gptrun::Options o = options();
    o.sample = false;
    o.data = train;
    o.steps = 3;
    o.progress = false;
    o.resume.clear();
    gptrun::Trainer t(o);
    Status s = t.setUp();
    ASSERT_TRUE(s) << s.message();
    s = t.run();
    ASSERT_TRUE(s) << s.message();
    auto latest = checkpoint::latest((dir / "ckpt").string());
    ASSERT_TRUE(latest) << latest.status().message();
  }

  gptrun::Options options() {
    gptrun::Options o;
    o.executable = exe;
    o.checkpointDir = (dir / "ckpt").string();
    o.resume = "latest";
    o.sample = true;
    o.samplePrompt = kPrompt;
    o.sampleTokens = kTokens;
    o.seed = 7;
    o.vocabDir = GPTC_DATA_DIR "/gpt2";
    return o;
  }

  /// gptrun --sample's stdout and stderr; its status in `status`.
  std::string sample(const gptrun::Options &o, Status &status, std::string *log = nullptr) {
    std::FILE *out = std::tmpfile(), *err = std::tmpfile();
    status = gptrun::sample(o, out, err);
    auto read = [](std::FILE *f) {
      std::string s(size_t(std::ftell(f)), '\0');
      std::rewind(f);
      s.resize(std::fread(s.data(), 1, s.size(), f));
      std::fclose(f);
      return s;
    };
    std::string text = read(out), messages = read(err);
    if (log)
      *log = messages;
    return text;
  }

  ScratchDir scratch{"sample-test"};
  fs::path dir = scratch.path();
  std::string exe;
};

// Verify that sampling from a checkpoint prints the prompt and N tokens
// (the Generator's, decoded), deterministically for a seed, and that
// another seed gives other text (the check can fail).
TEST_F(SampleTest, SamplesNTokensDeterministically) {
  ASSERT_NO_FATAL_FAILURE(trainCheckpoint());
  gptrun::Options o = options();
  Status s = Status::ok();
  std::string log;
  std::string a = sample(o, s, &log);
  ASSERT_TRUE(s) << s.message();
  EXPECT_NE(log.find("step-"), std::string::npos) << log;
  EXPECT_EQ(log.find("untrained"), std::string::npos) << log;
  std::string b = sample(o, s);
  ASSERT_TRUE(s) << s.message();
  EXPECT_EQ(a, b);
  o.seed = 8;
  std::string c = sample(o, s);
  ASSERT_TRUE(s) << s.message();
  EXPECT_NE(a, c);

  // The same draws through the Generator on a session of our own: exactly
  // N ids inside the vocabulary, whose decoding is what was printed.
  auto session = openSession(exe, {});
  ASSERT_TRUE(session) << session.status().message();
  auto ckpt = checkpoint::readCheckpoint(*checkpoint::latest((dir / "ckpt").string()));
  ASSERT_TRUE(ckpt) << ckpt.status().message();
  ASSERT_TRUE(checkpoint::restore(**session, *ckpt, "ckpt"));
  auto generator = gptrun::Generator::create(**session);
  ASSERT_TRUE(generator) << generator.status().message();
  EXPECT_EQ(generator->seq(), kSeq);
  EXPECT_EQ(generator->vocab(), 50257);
  auto tokenizer = data::Tokenizer::load(GPTC_DATA_DIR "/gpt2");
  ASSERT_TRUE(tokenizer);
  std::vector<int32_t> tokens = tokenizer->encode(kPrompt);
  size_t promptTokens = tokens.size();
  ASSERT_LE(promptTokens, size_t(kSeq));
  ASSERT_GT(promptTokens + kTokens, size_t(kSeq)); // the window slides
  gptrun::UniformSource uniform(7);
  for (int64_t i = 0; i < kTokens; ++i) {
    auto id = generator->next(tokens, {1.0, 40}, uniform);
    ASSERT_TRUE(id) << id.status().message();
    ASSERT_GE(*id, 0);
    ASSERT_LT(*id, 50257);
    tokens.push_back(*id);
  }
  auto continuation =
      tokenizer->decode(std::vector<int32_t>(tokens.begin() + promptTokens, tokens.end()));
  ASSERT_TRUE(continuation);
  EXPECT_EQ(a, kPrompt + *continuation + "\n");
}

// Verify greedy sampling (temperature 0) ignores the seed.
TEST_F(SampleTest, GreedyIgnoresTheSeed) {
  ASSERT_NO_FATAL_FAILURE(trainCheckpoint());
  gptrun::Options o = options();
  o.temperature = 0;
  Status s = Status::ok();
  std::string a = sample(o, s);
  ASSERT_TRUE(s) << s.message();
  o.seed = 99;
  EXPECT_EQ(sample(o, s), a);
  ASSERT_TRUE(s) << s.message();
}

// Verify that without --resume the parameters come from @init with a
// warning, and that prompts longer than T and missing checkpoints are
// errors naming the flag.
TEST_F(SampleTest, InitWarningsAndErrors) {
  ASSERT_NO_FATAL_FAILURE(trainCheckpoint());
  gptrun::Options o = options();
  o.resume.clear();
  Status s = Status::ok();
  std::string log;
  std::string text = sample(o, s, &log);
  ASSERT_TRUE(s) << s.message();
  EXPECT_NE(log.find("warning: no --resume: the model is untrained"), std::string::npos) << log;
  EXPECT_EQ(text.rfind(kPrompt, 0), 0u) << text;

  o = options();
  o.samplePrompt = "one two three four five six seven eight nine ten eleven twelve thirteen "
                   "fourteen fifteen sixteen seventeen";
  sample(o, s);
  ASSERT_FALSE(s);
  EXPECT_NE(s.message().find("--sample: the prompt is"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("more than the T=16"), std::string::npos) << s.message();

  o = options();
  o.checkpointDir = (dir / "nothing-here").string();
  sample(o, s);
  ASSERT_FALSE(s);
  EXPECT_NE(s.message().find("--resume latest"), std::string::npos) << s.message();

  o = options();
  o.vocabDir = (dir / "no-vocab").string();
  sample(o, s);
  ASSERT_FALSE(s);
  EXPECT_NE(s.message().find("--vocab-dir"), std::string::npos) << s.message();
}

} // namespace

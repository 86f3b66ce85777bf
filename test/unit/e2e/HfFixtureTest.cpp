//===- HfFixtureTest.cpp - transformers' own file and numbers, in CI -------===//
//
// test/fixtures/hf_tiny/ comes from bench/device/hf_parity.sh on the GPU
// machine: a random `tiny` GPT2LMHeadModel as transformers' save_pretrained
// wrote it (model.safetensors + config.json) and expected.json with a
// batch (B=2, T=8) and transformers' fp64 loss and row-0 logits for it.
// Imported into the fp32 `tiny` Host executable, @forward's loss is within
// 1e-5 relative and @logits within 1e-4 absolute of them; exported and
// imported again, the parameters are the same bits. Skipped until the
// fixture is committed. GPTC_HF_FIXTURE=DIR checks another one (the device
// script's $OUT/fixtures/hf_tiny, before committing it).
//
//===----------------------------------------------------------------------===//

#include "TestUtils.h"

#include "compiler/Codegen/EmitExecutable.h"
#include "runtime/checkpoint/Gpt2Weights.h"
#include "runtime/data/Json.h"
#include "runtime/executor/HostBackend.h"
#include "runtime/executor/Session.h"
#include "runtime/support/FileIO.h"
#include "test/unit/ScratchDir.h"

#include <cstdlib>
#include <cstring>
#include <filesystem>

using namespace gptc;
using namespace gptc::testing;

namespace {

std::string fixtureDir() {
  const char *dir = std::getenv("GPTC_HF_FIXTURE");
  return dir && *dir ? dir : GPTC_SOURCE_DIR "/test/fixtures/hf_tiny";
}

std::vector<int32_t> ints(const data::JsonValue *v) {
  std::vector<int32_t> out;
  if (v)
    for (const data::JsonValue &e : v->array)
      out.push_back(int32_t(e.integer));
  return out;
}

class HfFixtureTest : public GPT2Test {
protected:
  ScratchDir scratch{"hf-fixture"};
};

// Verify that transformers' tiny model gives transformers' loss and logits
// in gptc, and survives export and import.
TEST_F(HfFixtureTest, TransformersModelGivesTransformersLoss) {
  const std::string kFixture = fixtureDir();
  if (!std::filesystem::exists(kFixture + "/expected.json"))
    GTEST_SKIP() << kFixture << " is not committed yet (bench/device/hf_parity.sh writes it)";
  StatusOr<std::string> text = readFile(kFixture + "/expected.json");
  ASSERT_TRUE(text) << text.status().message();
  StatusOr<data::JsonValue> expected = data::parseJson(*text);
  ASSERT_TRUE(expected) << expected.status().message();
  const data::JsonValue *loss = expected->find("loss"), *rows = expected->find("logits_row0");
  ASSERT_TRUE(loss && rows);
  std::vector<int32_t> tokens = ints(expected->find("tokens")),
                       targets = ints(expected->find("targets"));

  ASSERT_TRUE(compile("tiny", Phase::MemoryPlan, [](CompileOptions &o) { o.precision = PrecisionPolicy::Fp32; }));
  codegen::EmitOptions emit;
  emit.target = codegen::EmitOptions::Target::Host;
  auto bytes = codegen::emitExecutable(*module, emit);
  ASSERT_TRUE(mlir::succeeded(bytes)) << diagnostics;
  auto exe = Executable::loadBytes(*bytes, "tiny-host.fb");
  ASSERT_TRUE(exe) << exe.status().message();
  auto config = gpt2::configOf(exe->get());
  ASSERT_TRUE(config) << config.status().message();
  auto opened = Session::create(std::move(*exe), createHostBackend);
  ASSERT_TRUE(opened) << opened.status().message();
  Session &session = **opened;
  ASSERT_TRUE(session.setInput("init", "seed", std::vector<int32_t>{1337}));
  ASSERT_TRUE(session.run("init"));
  Status imported = gpt2::initFrom(session, kFixture);
  ASSERT_TRUE(imported) << imported.message();

  auto tokensIndex = session.findTensor("tokens", "forward");
  ASSERT_TRUE(tokensIndex);
  int64_t B = session.tensor(*tokensIndex).shape()->Get(0);
  int64_t T = session.tensor(*tokensIndex).shape()->Get(1);
  ASSERT_EQ(int64_t(tokens.size()), B * T) << "the fixture's batch is not tiny's B x T";
  ASSERT_EQ(tokens.size(), targets.size());
  ASSERT_TRUE(session.setInput("forward", "tokens", tokens));
  ASSERT_TRUE(session.setInput("forward", "targets", targets));
  ASSERT_TRUE(session.run("forward"));
  auto got = session.getScalarF32("forward", "loss");
  ASSERT_TRUE(got) << got.status().message();
  EXPECT_NEAR(*got, loss->number, 1e-5 * loss->number);

  ASSERT_TRUE(session.setInput("logits", "tokens", tokens));
  ASSERT_TRUE(session.run("logits"));
  auto logits = session.getOutput("logits", "logits");
  ASSERT_TRUE(logits);
  std::vector<float> l(logits->size() / 4);
  std::memcpy(l.data(), logits->data(), logits->size());
  ASSERT_EQ(int64_t(rows->array.size()), T);
  double worst = 0;
  for (int64_t t = 0; t < T; ++t) {
    const data::JsonValue &row = rows->array[size_t(t)];
    ASSERT_EQ(int64_t(row.array.size()), config->vocab);
    for (int64_t v = 0; v < config->vocab; ++v)
      worst = std::max(worst, std::fabs(row.array[size_t(v)].number -
                                        l[size_t(t * config->paddedVocab + v)]));
  }
  EXPECT_LT(worst, 1e-4);

  // transformers' file -> gptc -> our export -> gptc: the same parameters.
  StatusOr<gpt2::Weights> fromHf = gpt2::importWeights(kFixture, *config);
  ASSERT_TRUE(fromHf) << fromHf.status().message();
  std::string out = (scratch.path() / "exported").string();
  ASSERT_TRUE(gpt2::exportHuggingFace(out, *fromHf, *config));
  StatusOr<gpt2::Weights> back = gpt2::importWeights(out, *config);
  ASSERT_TRUE(back) << back.status().message();
  ASSERT_EQ(back->size(), fromHf->size());
  for (size_t i = 0; i < back->size(); ++i)
    EXPECT_EQ((*back)[i].bytes, (*fromHf)[i].bytes) << (*fromHf)[i].name;
}

} // namespace

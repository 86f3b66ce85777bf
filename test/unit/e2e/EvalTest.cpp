//===- EvalTest.cpp - gptrun --eval on a model whose answers are known ----===//
//
// `mini` compiled for the Host, with weights built so that the model's
// answers are known: every block weight and bias is zero (the blocks add
// nothing to the residual stream), LayerNorms are the identity affine map,
// wpe is zero and wte's rows are random. Then the logits at a position are
// LN(wte[t]) . wte[v], largest by far for v = t: the model predicts that
// the current token repeats. The ending that repeats the context's last
// token is its choice, whatever index the label gives it. The weights go
// in through --init-from, a Hugging Face directory written by gpt-convert's
// writer, and the examples through a jsonl in hellaswag_val.jsonl's format.
//
//===----------------------------------------------------------------------===//

#include "ScratchDir.h"
#include "TestUtils.h"

#include "compiler/Codegen/EmitExecutable.h"
#include "runtime/checkpoint/Gpt2Weights.h"
#include "runtime/support/FileIO.h"
#include "tools/gptrun/Eval.h"

#include <cstdio>
#include <fstream>
#include <random>

using namespace gptc;
using namespace gptc::testing;

namespace {

class HellaSwagEvalTest : public GPT2Test {
protected:
  ScratchDir scratch{"eval-e2e"};
};

// Verify that --eval picks the ending the model prefers, at any label index.
TEST_F(HellaSwagEvalTest, PicksTheEndingTheModelPrefers) {
  ASSERT_TRUE(compile("mini", Phase::MemoryPlan, [](CompileOptions &o) {
    o.batch = 3; // 4 candidates per example: batches straddle examples
    o.seq = 16;
  })) << diagnostics;
  codegen::EmitOptions emit;
  emit.target = codegen::EmitOptions::Target::Host;
  auto bytes = codegen::emitExecutable(*module, emit);
  ASSERT_TRUE(mlir::succeeded(bytes)) << diagnostics;
  std::string exe = (scratch.path() / "mini.fb").string();
  std::ofstream(exe, std::ios::binary)
      .write(reinterpret_cast<const char *>(bytes->data()), std::streamsize(bytes->size()));
  auto loaded = Executable::loadBytes(*bytes, exe);
  ASSERT_TRUE(loaded);
  auto config = gpt2::configOf(loaded->get());
  ASSERT_TRUE(config) << config.status().message();

  // The "repeat the current token" model.
  gpt2::Weights weights;
  for (const schema::Tensor *t : *loaded->get().tensors()) {
    if (t->role() != schema::TensorRole::Parameter)
      continue;
    checkpoint::Tensor w;
    w.name = t->name()->str();
    w.shape.assign(t->shape()->begin(), t->shape()->end());
    w.bytes.assign(t->size_bytes(), 0);
    float *f = reinterpret_cast<float *>(w.bytes.data());
    size_t n = w.bytes.size() / 4;
    bool lnWeight = w.name.find("ln_") != std::string::npos &&
                    w.name.compare(w.name.size() - 7, 7, ".weight") == 0;
    if (lnWeight)
      std::fill(f, f + n, 1.0f);
    if (w.name == "wte") {
      std::mt19937 gen(7);
      std::normal_distribution<float> normal;
      for (size_t i = 0; i < size_t(config->vocab * config->nEmbd); ++i)
        f[i] = normal(gen);
    }
    weights.push_back(std::move(w));
  }
  std::string hf = (scratch.path() / "hf").string();
  ASSERT_TRUE(gpt2::exportHuggingFace(hf, weights, *config));

  // The right ending repeats the context's last word; the label moves.
  std::string jsonl = (scratch.path() / "hs.jsonl").string();
  ASSERT_TRUE(writeFileAtomically(
      jsonl,
      R"({"ctx": "The old cat", "endings": ["sat on the mat", "cat cat", "dog ran", "the end"], "label": 1})"
      "\n"
      R"({"ctx": "A long day in the garden", "endings": ["garden garden garden", "was fine", "ended", "rain"], "label": 0})"
      "\n"
      R"({"ctx": "She read the letter", "endings": ["twice", "and wept", "slowly", "letter letter"], "label": 3})"
      "\n"
      // A wrong label: the model's choice (index 2) is not counted.
      R"({"ctx": "Then the music", "endings": ["stopped", "began", "music", "faded"], "label": 0})"
      "\n"));

  gptrun::Options o;
  o.executable = exe;
  o.target = "host";
  o.eval = jsonl;
  o.initFrom = hf;
  o.vocabDir = GPTC_DATA_DIR "/gpt2";
  std::string outPath = (scratch.path() / "out.txt").string();
  std::FILE *out = std::fopen(outPath.c_str(), "w+");
  ASSERT_TRUE(out);
  StatusOr<gptrun::EvalResult> r = gptrun::evaluate(o, out, out);
  std::fclose(out);
  ASSERT_TRUE(r) << r.status().message();
  EXPECT_EQ(r->examples, 4);
  EXPECT_EQ(r->correctNorm, 3);
  EXPECT_EQ(r->correctSum, 3);
  EXPECT_EQ(r->truncatedRows, 0);
  std::string printed = *readFile(outPath);
  EXPECT_NE(printed.find("4 examples | acc_norm 0.7500 (3) | acc 0.7500 (3)"), std::string::npos)
      << printed;

  // --eval-limit takes the first examples only.
  o.evalLimit = 1;
  out = std::fopen(outPath.c_str(), "w+");
  r = gptrun::evaluate(o, out, out);
  std::fclose(out);
  ASSERT_TRUE(r) << r.status().message();
  EXPECT_EQ(r->examples, 1);
  EXPECT_EQ(r->correctNorm, 1);
}

} // namespace

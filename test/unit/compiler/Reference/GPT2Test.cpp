//===- GPT2Test.cpp - the GPT-2 forward graph on the reference interpreter ===//
//
// Instantiates models/gpt2.mlir for the `tiny` preset and checks its loss
// against a PyTorch fixture (test/fixtures/gpt2_tiny.txt, written by
// test/fixtures/make_gpt2_fixture.py with fixed weights and batch).
//
//===----------------------------------------------------------------------===//

#include "TestUtils.h"

#include "dialects/GPT/Transforms/Passes.h"

#include "mlir/Pass/PassManager.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/Support/MemoryBuffer.h"

#include <cmath>
#include <fstream>
#include <map>
#include <sstream>

using namespace gptc;
using namespace gptc::testing;
using reference::Precision;
using reference::Tensor;

namespace {

/// The records of a fixture file that these tests read.
struct Fixture {
  std::map<std::string, int64_t> config;
  std::vector<double> tokens, targets;
  double lossFp64 = 0, lossFp32 = 0;
  std::map<std::string, Tensor> params, grads;
};

bool readFixture(const std::string &path, Fixture &f, std::string &error) {
  std::ifstream in(path);
  if (!in) {
    error = "cannot open " + path;
    return false;
  }
  std::string line;
  auto readTensor = [](std::istringstream &is) {
    std::string name;
    int rank;
    is >> name >> rank;
    std::vector<int64_t> shape(rank);
    for (int64_t &d : shape)
      is >> d;
    Tensor t(shape);
    for (double &x : t.data)
      is >> x;
    return std::make_pair(name, t);
  };
  while (std::getline(in, line)) {
    std::istringstream is(line);
    std::string kind;
    is >> kind;
    if (kind == "config") {
      std::string key;
      int64_t value;
      while (is >> key >> value)
        f.config[key] = value;
    } else if (kind == "tokens" || kind == "targets") {
      int64_t n;
      is >> n;
      auto &dst = kind == "tokens" ? f.tokens : f.targets;
      dst.resize(n);
      for (double &x : dst)
        is >> x;
    } else if (kind == "loss_fp64") {
      is >> f.lossFp64;
    } else if (kind == "loss_fp32") {
      is >> f.lossFp32;
    } else if (kind == "param" || kind == "grad") {
      auto [name, t] = readTensor(is);
      (kind == "param" ? f.params : f.grads)[name] = t;
    }
    if (is.fail() && !is.eof()) {
      error = "malformed line: " + line.substr(0, 60);
      return false;
    }
  }
  return true;
}

class GPT2Test : public ReferenceTest {
protected:
  /// Parses models/gpt2.mlir and runs the import phase for `preset`.
  mlir::func::FuncOp instantiate(const std::string &preset, bool decompose = false) {
    std::string error;
    auto file = mlir::openInputFile(GPTC_SOURCE_DIR "/models/gpt2.mlir", &error);
    EXPECT_TRUE(file) << error;
    if (!file)
      return nullptr;
    module = parse(file->getBuffer());
    if (!module)
      return nullptr;
    mlir::PassManager pm(&context);
    PipelineOptions options;
    options.model = preset;
    buildPipeline(pm, options, Phase::Import);
    if (decompose)
      pm.addNestedPass<mlir::func::FuncOp>(mlir::gpt::createDecomposeAttentionPass());
    EXPECT_TRUE(mlir::succeeded(pm.run(*module))) << diagnostics;
    return module->lookupSymbol<mlir::func::FuncOp>("forward");
  }

  /// Arguments of @forward filled from the fixture, by gpt.param/gpt.input name.
  std::vector<Tensor> fixtureArgs(mlir::func::FuncOp fn, const Fixture &f) {
    std::vector<Tensor> args;
    for (const std::string &name : reference::getArgumentNames(fn)) {
      if (name == "tokens" || name == "targets") {
        args.push_back(Tensor({f.config.at("batch"), f.config.at("seq")},
                              name == "tokens" ? f.tokens : f.targets));
        continue;
      }
      auto it = f.params.find(name);
      EXPECT_NE(it, f.params.end()) << "fixture lacks parameter " << name;
      args.push_back(it == f.params.end() ? Tensor() : it->second);
    }
    return args;
  }

  double loss(mlir::func::FuncOp fn, const std::vector<Tensor> &args, Precision p) {
    auto results = reference::evaluate(fn, args, p);
    EXPECT_TRUE(mlir::succeeded(results)) << diagnostics;
    return mlir::succeeded(results) ? (*results)[0].data[0] : NAN;
  }
};

// Verify that the freshly initialised tiny model predicts close to uniform:
// with N(0, 0.02) weights the logits are near zero and the loss near ln V.
TEST_F(GPT2Test, InitialLossIsNearLogVocab) {
  mlir::func::FuncOp fn = instantiate("tiny");
  ASSERT_TRUE(fn);
  std::vector<Tensor> args = reference::initializeArguments(fn, 1, /*nLayer=*/2);
  std::vector<std::string> names = reference::getArgumentNames(fn);
  for (size_t i = 0; i < names.size(); ++i)
    if (names[i] == "tokens" || names[i] == "targets")
      for (size_t j = 0; j < args[i].data.size(); ++j)
        args[i].data[j] = static_cast<double>((j * 7 + (names[i] == "targets")) % 60);
  EXPECT_NEAR(loss(fn, args, Precision::F64), std::log(60.0), 0.05);
}

// Verify the parameter count of every preset against llm.c's formula
// (124M with the vocabulary padded to 50304 has 124,475,904 parameters).
TEST_F(GPT2Test, ParameterCountsOfThePresets) {
  auto count = [&](const char *preset) -> int64_t {
    mlir::func::FuncOp fn = instantiate(preset);
    if (!fn)
      return -1;
    return fn->getAttrOfType<mlir::IntegerAttr>("gpt.num_parameters").getInt();
  };
  auto formula = [](int64_t l, int64_t c, int64_t vp, int64_t maxT) {
    return vp * c + maxT * c + 2 * c + l * (12 * c * c + 13 * c);
  };
  EXPECT_EQ(count("124M"), 124475904);
  EXPECT_EQ(count("124M"), formula(12, 768, 50304, 1024));
  EXPECT_EQ(count("350M"), formula(24, 1024, 50304, 1024));
  EXPECT_EQ(count("774M"), formula(36, 1280, 50304, 1024));
  EXPECT_EQ(count("1558M"), formula(48, 1600, 50304, 1024));
  EXPECT_EQ(count("tiny"), formula(2, 16, 64, 16));
}

class GPT2FixtureTest : public GPT2Test {
protected:
  void SetUp() override {
    std::string error;
    ASSERT_TRUE(readFixture(GPTC_SOURCE_DIR "/test/fixtures/gpt2_tiny.txt", fixture, error))
        << error;
    ASSERT_EQ(fixture.config.at("n_layer"), 2);
    ASSERT_EQ(fixture.config.at("padded_vocab_size"), 64);
  }
  Fixture fixture;
};

// Verify the fp64 forward loss against PyTorch float64 (same weights and
// batch): both are exact to rounding, so they agree to ~1e-12.
TEST_F(GPT2FixtureTest, Fp64LossMatchesPyTorch) {
  mlir::func::FuncOp fn = instantiate("tiny");
  ASSERT_TRUE(fn);
  double got = loss(fn, fixtureArgs(fn, fixture), Precision::F64);
  EXPECT_NEAR(got, fixture.lossFp64, 1e-10 * fixture.lossFp64);
}

// Verify the fp32 loss against PyTorch float32: different summation orders
// give differences of a few float ulps, so 1e-5 relative.
TEST_F(GPT2FixtureTest, Fp32LossMatchesPyTorch) {
  mlir::func::FuncOp fn = instantiate("tiny");
  ASSERT_TRUE(fn);
  double got = loss(fn, fixtureArgs(fn, fixture), Precision::F32);
  EXPECT_NEAR(got, fixture.lossFp32, 1e-5 * fixture.lossFp32);
  EXPECT_NEAR(got, fixture.lossFp64, 1e-5 * fixture.lossFp64);
}

// Verify that the decomposed attention computes the same model loss.
TEST_F(GPT2FixtureTest, DecomposedAttentionMatchesPyTorch) {
  mlir::func::FuncOp fn = instantiate("tiny", /*decompose=*/true);
  ASSERT_TRUE(fn);
  bool fused = false;
  fn.walk([&](mlir::gpt::CausalAttentionOp) { fused = true; });
  ASSERT_FALSE(fused);
  double got = loss(fn, fixtureArgs(fn, fixture), Precision::F64);
  EXPECT_NEAR(got, fixture.lossFp64, 1e-10 * fixture.lossFp64);
}

} // namespace

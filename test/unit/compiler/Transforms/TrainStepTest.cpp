//===- TrainStepTest.cpp - @train_step and @init on the interpreter ------===//

#include "TestUtils.h"

#include "compiler/Transforms/Passes.h"

#include <cmath>

using namespace gptc;
using namespace gptc::testing;
using reference::Precision;
using reference::Tensor;

namespace {

/// Arguments of @train_step: params, m = v = 0, tokens, targets, step.
std::vector<Tensor> trainArgs(const std::vector<Tensor> &params, const Tensor &tokens,
                              const Tensor &targets, int64_t step) {
  std::vector<Tensor> args = params;
  for (int copy = 0; copy < 2; ++copy)
    for (const Tensor &p : params)
      args.emplace_back(p.shape, 0.0);
  args.push_back(tokens);
  args.push_back(targets);
  args.emplace_back(std::vector<int64_t>{}, static_cast<double>(step));
  args.emplace_back(std::vector<int64_t>{}, 1.0); // lr_scale
  return args;
}

/// @train_step's results minus loss, grad norm and lr: the next state.
std::vector<Tensor> nextState(std::vector<Tensor> results) {
  results.resize(results.size() - 3);
  return results;
}

class TrainStepTest : public GPT2FixtureTest {
protected:
  /// The fixture's parameters in @train_step's order.
  std::vector<Tensor> fixtureParams() {
    std::vector<Tensor> params;
    mlir::func::FuncOp step = function("train_step");
    for (unsigned i = 0; i < step.getNumArguments(); ++i)
      if (auto name = step.getArgAttrOfType<mlir::StringAttr>(i, mlir::gpt::kParamAttrName))
        params.push_back(fixture.params.at(name.str()));
    return params;
  }
  Tensor tokens() { return Tensor({1, 2, 8}, fixture.tokens); }
  Tensor targets() { return Tensor({1, 2, 8}, fixture.targets); }
};

// Verify five AdamW steps against torch.optim.AdamW (lr 1e-2, betas 0.9 and
// 0.95, eps 1e-8, weight decay 0.1 on matrices, no clipping): the loss
// before every step agrees to 1e-9 in fp64.
TEST_F(TrainStepTest, MatchesPyTorchAdamW) {
  ASSERT_TRUE(compile("tiny", Phase::TrainStep, [&](CompileOptions &o) {
    o.lr = fixture.adamw.at("lr");
    o.beta1 = fixture.adamw.at("beta1");
    o.beta2 = fixture.adamw.at("beta2");
    o.epsilon = fixture.adamw.at("eps");
    o.weightDecay = fixture.adamw.at("weight_decay");
    o.gradClip = 0.0;
  }));
  ASSERT_EQ(fixture.trainLosses.size(), 5u);
  std::vector<Tensor> args = trainArgs(fixtureParams(), tokens(), targets(), 0);
  for (int64_t s = 0; s < 5; ++s) {
    args[args.size() - 2].data[0] = static_cast<double>(s); // step
    auto out = evaluate("train_step", args);
    ASSERT_FALSE(out.empty());
    EXPECT_NEAR(out[output("train_step", "loss")].data[0], fixture.trainLosses[s],
                1e-9 * fixture.trainLosses[s])
        << "step " << s;
    std::vector<Tensor> state = nextState(out);
    std::copy(state.begin(), state.end(), args.begin());
  }
}

// Verify that accumulating two micro-batches gives the mean loss and the norm
// of the mean gradient of the two batches.
TEST_F(TrainStepTest, GradientAccumulationAveragesMicroBatches) {
  ASSERT_TRUE(compile("tiny", Phase::TrainStep, [](CompileOptions &o) { o.accumSteps = 2; }));
  Tensor tok2({2, 2, 8}), tgt2({2, 2, 8});
  for (size_t i = 0; i < 16; ++i) {
    tok2.data[i] = fixture.tokens[i];
    tgt2.data[i] = fixture.targets[i];
    tok2.data[16 + i] = fixture.targets[i]; // a second, different batch
    tgt2.data[16 + i] = fixture.tokens[15 - i];
  }
  auto out = evaluate("train_step", trainArgs(fixtureParams(), tok2, tgt2, 0));
  ASSERT_FALSE(out.empty());

  mlir::func::FuncOp grad = function("forward_grad");
  auto micro = [&](int m) {
    Fixture f = fixture;
    f.tokens.assign(tok2.data.begin() + 16 * m, tok2.data.begin() + 16 * (m + 1));
    f.targets.assign(tgt2.data.begin() + 16 * m, tgt2.data.begin() + 16 * (m + 1));
    return evaluate("forward_grad", fixtureArgs(grad, f));
  };
  auto g0 = micro(0), g1 = micro(1);
  double sumSq = 0;
  for (size_t r = 1; r < g0.size(); ++r)
    for (size_t k = 0; k < g0[r].data.size(); ++k) {
      double mean = 0.5 * (g0[r].data[k] + g1[r].data[k]);
      sumSq += mean * mean;
    }
  EXPECT_NEAR(out[output("train_step", "loss")].data[0], 0.5 * (g0[0].data[0] + g1[0].data[0]), 1e-12);
  EXPECT_NEAR(out[output("train_step", "grad_norm")].data[0], std::sqrt(sumSq), 1e-12);
}

// Verify llm.c's clipping rule: with the norm above grad-clip, the first
// moment after step 0 is (1 - beta1) * g * clip / norm.
TEST_F(TrainStepTest, ClippingScalesTheGradient) {
  const double clip = 0.05;
  ASSERT_TRUE(compile("tiny", Phase::TrainStep, [&](CompileOptions &o) { o.gradClip = clip; }));
  auto out = evaluate("train_step", trainArgs(fixtureParams(), tokens(), targets(), 0));
  ASSERT_FALSE(out.empty());
  double norm = out[output("train_step", "grad_norm")].data[0];
  ASSERT_GT(norm, clip);
  auto g = evaluate("forward_grad", fixtureArgs(function("forward_grad"), fixture));
  size_t n = g.size() - 1; // parameters
  for (size_t i = 0; i < n; ++i) {
    const Tensor &m = out[n + i]; // new adam_m of parameter i
    for (size_t k = 0; k < m.data.size(); k += 7)
      EXPECT_NEAR(m.data[k], 0.1 * g[1 + i].data[k] * clip / norm, 1e-15);
  }
}

// Verify that a few steps on a batch of real text lower the loss. The tiny
// model reads characters mapped into its 60-symbol vocabulary.
TEST_F(TrainStepTest, LearnsARealTextBatch) {
  ASSERT_TRUE(compile("tiny", Phase::TrainStep, [](CompileOptions &o) { o.lr = 1e-2; }));
  const std::string text = "It is a truth universally acknowledged, that a single man";
  auto id = [](char c) -> double {
    if (c >= 'a' && c <= 'z')
      return c - 'a';
    if (c >= 'A' && c <= 'Z')
      return 26 + (c - 'A');
    return c == ' ' ? 52 : c == ',' ? 53 : 54;
  };
  Tensor tok({1, 2, 8}), tgt({1, 2, 8});
  for (size_t b = 0; b < 2; ++b)
    for (size_t t = 0; t < 8; ++t) {
      tok.data[b * 8 + t] = id(text[b * 20 + t]);
      tgt.data[b * 8 + t] = id(text[b * 20 + t + 1]);
    }
  auto params = evaluate("init", {Tensor({}, 7.0)});
  ASSERT_FALSE(params.empty());
  std::vector<Tensor> args = trainArgs(params, tok, tgt, 0);
  std::vector<double> losses;
  for (int64_t s = 0; s < 30; ++s) {
    args[args.size() - 2].data[0] = static_cast<double>(s); // step
    auto out = evaluate("train_step", args, Precision::F32);
    ASSERT_FALSE(out.empty());
    losses.push_back(out[output("train_step", "loss")].data[0]);
    std::vector<Tensor> state = nextState(out);
    std::copy(state.begin(), state.end(), args.begin());
  }
  EXPECT_NEAR(losses.front(), std::log(60.0), 0.1);
  EXPECT_LT(losses.back(), 0.5 * losses.front())
      << "first " << losses.front() << " last " << losses.back();
}

// Verify @init: deterministic in the seed, GPT-2's scales, LN ones, zeros.
TEST_F(TrainStepTest, InitFollowsGPT2Scheme) {
  ASSERT_TRUE(compile("tiny", Phase::TrainStep));
  auto a = evaluate("init", {Tensor({}, 1.0)});
  auto b = evaluate("init", {Tensor({}, 1.0)});
  auto c = evaluate("init", {Tensor({}, 2.0)});
  ASSERT_FALSE(a.empty());
  mlir::func::FuncOp init = function("init");
  auto stddev = [](const Tensor &t) {
    double sum = 0, sq = 0;
    for (double x : t.data) {
      sum += x;
      sq += x * x;
    }
    double mean = sum / t.data.size();
    return std::sqrt(sq / t.data.size() - mean * mean);
  };
  for (unsigned i = 0; i < init.getNumResults(); ++i) {
    std::string name = init.getResultAttrOfType<mlir::StringAttr>(i, mlir::gpt::kParamAttrName).str();
    EXPECT_EQ(a[i].data, b[i].data) << name;
    llvm::StringRef n(name);
    if (n.ends_with(".bias")) {
      EXPECT_EQ(a[i].data, std::vector<double>(a[i].data.size(), 0.0)) << name;
    } else if (n.contains("ln_")) {
      EXPECT_EQ(a[i].data, std::vector<double>(a[i].data.size(), 1.0)) << name;
    } else {
      EXPECT_NE(a[i].data, c[i].data) << name;
      double want = n.ends_with("c_proj.weight") ? 0.02 / std::sqrt(4.0) : 0.02;
      if (a[i].data.size() >= 1024) {
        EXPECT_NEAR(stddev(a[i]), want, 0.1 * want) << name;
      }
    }
  }
}

} // namespace

//===- HostTraining.h - compile, load and train on the Host backend -------===//
//
// The steps the E2E tests share: the compiled module as a Host session,
// @init plus zero AdamW moments on it and on the reference interpreter, and
// one @train_step with its four inputs.
//
//===----------------------------------------------------------------------===//

#ifndef GPTC_TEST_UNIT_E2E_HOSTTRAINING_H
#define GPTC_TEST_UNIT_E2E_HOSTTRAINING_H

#include "TestUtils.h"

#include "compiler/Codegen/EmitExecutable.h"
#include "runtime/executor/HostBackend.h"
#include "runtime/executor/Session.h"

#include <cmath>
#include <functional>
#include <memory>

namespace gptc::testing {

/// The program that runs step `step` (0-based) of a run from @init:
/// @train_step_first for the first where gpt-fp8-steady-step made one (the
/// FP8 histories are empty), else @train_step.
inline std::string stepProgram(Session &s, int64_t step) {
  return step == 0 && s.program("train_step_first") ? "train_step_first" : "train_step";
}

class HostTrainingTest : public GPT2Test {
protected:
  /// The module as a Host executable named `name`; `inspect` sees it before
  /// the session takes it. Null (with a test failure) when a step fails.
  std::unique_ptr<Session> hostSession(const std::string &name, codegen::EmitOptions emit = {},
                                       std::function<void(const Executable &)> inspect = {}) {
    emit.target = codegen::EmitOptions::Target::Host;
    auto bytes = codegen::emitExecutable(*module, emit);
    EXPECT_TRUE(mlir::succeeded(bytes)) << diagnostics;
    if (mlir::failed(bytes))
      return nullptr;
    StatusOr<Executable> exe = Executable::loadBytes(std::move(*bytes), name);
    EXPECT_TRUE(exe) << exe.status().message();
    if (!exe)
      return nullptr;
    if (inspect)
      inspect(*exe);
    auto session = Session::create(std::move(*exe), createHostBackend);
    EXPECT_TRUE(session) << session.status().message();
    return session ? std::move(*session) : nullptr;
  }

  /// Batch `step` of a learnable stream, as run-reference's synthetic one:
  /// each token decides the next (t' = 7 t + 3, nudged every 11 tokens so
  /// that it is not a short cycle). `tokens` and `targets` get `window` ids;
  /// the targets are the tokens shifted by one.
  static void learnableBatch(int64_t step, int64_t window, int64_t vocab,
                             std::vector<int32_t> &tokens, std::vector<int32_t> &targets) {
    std::vector<int32_t> stream = {5};
    for (int64_t i = 1; i <= (step + 1) * window; ++i)
      stream.push_back(int32_t((7 * stream.back() + 3 + (i % 11 == 0)) % vocab));
    tokens.assign(stream.begin() + step * window, stream.begin() + (step + 1) * window);
    targets.assign(stream.begin() + step * window + 1, stream.begin() + (step + 1) * window + 1);
  }

  /// @init(seed) and zero AdamW moments on the session.
  static Status initialize(Session &s, int32_t seed) {
    std::vector<int32_t> in = {seed};
    if (Status st = s.setInput("init", "seed", in); !st)
      return st;
    if (Status st = s.run("init"); !st)
      return st;
    return s.zeroTensors(schema::TensorRole::OptimizerState);
  }

  /// The same on the interpreter: @init(seed)'s parameters, then zeros for
  /// the rest of @train_step's state (AdamW's m and v, FP8 amax
  /// histories), as @train_step takes them.
  std::vector<reference::Tensor> referenceState(double seed) {
    std::vector<reference::Tensor> state = evaluate("init", {reference::Tensor({}, seed)});
    mlir::func::FuncOp step = function("train_step");
    for (size_t i = state.size(); i < stateSize(); ++i) {
      auto type = llvm::cast<mlir::RankedTensorType>(step.getArgumentTypes()[i]);
      state.emplace_back(std::vector<int64_t>(type.getShape().begin(), type.getShape().end()),
                         0.0);
    }
    return state;
  }

  /// @train_step's leading parameter and state arguments: the values a
  /// step's outputs start with and the next step takes.
  size_t stateSize() {
    mlir::func::FuncOp step = function("train_step");
    size_t n = 0;
    while (n < step.getNumArguments() && (step.getArgAttr(n, mlir::gpt::kParamAttrName) ||
                                          step.getArgAttr(n, "gpt.state")))
      ++n;
    return n;
  }

  /// initialize() on the session and the same start on the interpreter
  /// (referenceState); empty, with a failure, when the session's fails.
  std::vector<reference::Tensor> initializeBoth(Session &s, int32_t seed) {
    Status initialized = initialize(s, seed);
    EXPECT_TRUE(initialized) << initialized.message();
    return initialized ? referenceState(seed) : std::vector<reference::Tensor>();
  }

  /// @train_step on the interpreter from `state` (stateSize() values) for one
  /// batch of B x T tokens: every output (empty, with a failure, on error).
  std::vector<reference::Tensor>
  referenceTrainStep(const std::vector<reference::Tensor> &state, const std::vector<int32_t> &tokens,
                     const std::vector<int32_t> &targets, int64_t batch, int64_t seq, int64_t step,
                     reference::Precision precision = reference::Precision::F64) {
    std::vector<reference::Tensor> args = state;
    for (const std::vector<int32_t> *ids : {&tokens, &targets})
      args.emplace_back(std::vector<int64_t>{1, batch, seq},
                        std::vector<double>(ids->begin(), ids->end()));
    args.emplace_back(std::vector<int64_t>{}, static_cast<double>(step));
    args.emplace_back(std::vector<int64_t>{}, 1.0); // lr_scale
    bool first = step == 0 && module->lookupSymbol<mlir::func::FuncOp>("train_step_first");
    return evaluate(first ? "train_step_first" : "train_step", args, precision);
  }

  /// The fp64 interpreter's loss for one @train_step from @init(seed) on
  /// this batch (NaN, with a failure, on error).
  double referenceFirstLoss(const std::vector<int32_t> &tokens, const std::vector<int32_t> &targets,
                            int64_t batch, int64_t seq, double seed = 1337.0) {
    std::vector<reference::Tensor> args = referenceState(seed);
    std::vector<reference::Tensor> out =
        args.empty() ? args : referenceTrainStep(args, tokens, targets, batch, seq, 0);
    EXPECT_FALSE(out.empty()) << "the reference train step failed";
    return out.empty() ? std::nan("") : out[output("train_step", "loss")].data[0];
  }

  /// initialize(seed), then `steps` train steps on one batch; appends each
  /// step's loss to `losses`.
  static Status trainSameBatch(Session &s, const std::vector<int32_t> &tokens,
                               const std::vector<int32_t> &targets, int64_t steps,
                               std::vector<float> &losses, int32_t seed = 1337) {
    if (Status st = initialize(s, seed); !st)
      return st;
    for (int64_t step = 0; step < steps; ++step) {
      if (Status st = trainStep(s, tokens, targets, step); !st)
        return st;
      StatusOr<float> loss = s.getScalarF32(stepProgram(s, step), "loss");
      if (!loss)
        return loss.status();
      losses.push_back(*loss);
    }
    return Status::ok();
  }

  /// Sets tokens, targets, step and lr_scale (1) and runs step `step`'s
  /// program (stepProgram), whose outputs then hold the step's.
  static Status trainStep(Session &s, const std::vector<int32_t> &tokens,
                          const std::vector<int32_t> &targets, int64_t step) {
    std::vector<int32_t> stepIn = {static_cast<int32_t>(step)};
    std::vector<float> lrScale = {1.0f};
    std::string program = stepProgram(s, step);
    for (Status st : {s.setInput(program, "tokens", tokens),
                      s.setInput(program, "targets", targets),
                      s.setInput(program, "step", stepIn),
                      s.setInput(program, "lr_scale", lrScale)})
      if (!st)
        return st;
    return s.run(program);
  }
};

/// Relative L2 distance ||a - b|| / ||b|| of two copies of the parameter
/// or AdamW moment `name` (0 when b is zero), leaving out the key third of
/// a `c_attn.bias`: softmax ignores a per-row constant, so the key bias's
/// exact gradient is zero and AdamW's m / sqrt(v) turns its rounding noise
/// into lr-sized steps of random sign, which any change of rounding
/// (fusion, another summation order) redraws.
inline double relativeL2(const std::string &name, const std::vector<float> &a,
                         const std::vector<float> &b) {
  size_t skipBegin = 0, skipEnd = 0;
  if (name.find("attn.c_attn.bias") != std::string::npos)
    skipBegin = b.size() / 3, skipEnd = 2 * b.size() / 3;
  double diff = 0, norm = 0;
  for (size_t i = 0; i < b.size(); ++i) {
    if (i >= skipBegin && i < skipEnd)
      continue;
    double d = double(a[i]) - double(b[i]);
    diff += d * d;
    norm += double(b[i]) * double(b[i]);
  }
  return norm > 0 ? std::sqrt(diff / norm) : 0;
}

} // namespace gptc::testing

#endif // GPTC_TEST_UNIT_E2E_HOSTTRAINING_H

//===- PlanMemoryTest.cpp - gpt-plan-memory on the GPT-2 train step ------===//

#include "TestUtils.h"

#include "compiler/Transforms/Passes.h"

#include <functional>

using namespace gptc;
using namespace gptc::testing;
using reference::Tensor;

namespace {

int64_t planned(mlir::func::FuncOp fn, llvm::StringRef pool) {
  return fn->getAttrOfType<mlir::DictionaryAttr>("gpt.memory_plan")
      .getAs<mlir::IntegerAttr>(pool)
      .getInt();
}

bool isView(mlir::Operation *op) {
  if (llvm::isa<mlir::gpt::ReshapeOp>(op))
    return true;
  auto slice = llvm::dyn_cast<mlir::gpt::SliceOp>(op);
  return slice && slice.getDim() == 0;
}

/// Sum of every activation buffer, as if none were reused, and the largest
/// sum of buffers live at one program point (no plan can do better).
std::pair<int64_t, int64_t> unplannedAndLowerBound(mlir::func::FuncOp fn) {
  mlir::Block &body = fn.getBody().front();
  llvm::DenseMap<mlir::Operation *, int64_t> index;
  int64_t n = 0;
  for (mlir::Operation &op : body)
    index[&op] = n++;
  std::function<int64_t(mlir::Value)> lastUse = [&](mlir::Value v) {
    int64_t last = index[v.getDefiningOp()];
    for (mlir::Operation *user : v.getUsers()) {
      last = std::max(last, index[user]);
      if (isView(user))
        last = std::max(last, lastUse(user->getResult(0)));
    }
    return last;
  };
  std::vector<int64_t> live(n + 1, 0);
  int64_t total = 0;
  for (mlir::Operation &op : body.without_terminator()) {
    auto offsets = op.getAttrOfType<mlir::DenseI64ArrayAttr>("gpt.offsets");
    if (!offsets || isView(&op))
      continue;
    for (auto [r, off] : llvm::zip(op.getResults(), offsets.asArrayRef())) {
      if (off < 0)
        continue;
      int64_t bytes = llvm::cast<mlir::ShapedType>(r.getType()).getNumElements() * 4;
      total += bytes;
      for (int64_t i = index[&op], e = lastUse(r); i <= e; ++i)
        live[i] += bytes;
    }
  }
  return {total, *std::max_element(live.begin(), live.end())};
}

/// The plan reuses memory and stays within 10% of the live lower bound.
void expectTightPlan(mlir::func::FuncOp fn) {
  auto [total, bound] = unplannedAndLowerBound(fn);
  int64_t peak = planned(fn, "activations");
  EXPECT_GE(peak, bound);
  EXPECT_LT(peak, total);
  EXPECT_LE(static_cast<double>(peak), 1.10 * static_cast<double>(bound))
      << "peak " << peak << ", live lower bound " << bound << ", no reuse " << total;
}

// Verify the plan of the tiny train step: no two live buffers overlap,
// memory is reused, and the pools hold the parameters and both moments.
TEST_F(GPT2Test, TinyTrainStepPlanIsValid) {
  ASSERT_TRUE(compile("tiny", Phase::MemoryPlan));
  mlir::func::FuncOp step = function("train_step");
  EXPECT_TRUE(mlir::succeeded(verifyMemoryPlan(step))) << diagnostics;
  expectTightPlan(step);
  EXPECT_GE(planned(step, "params"), 7872 * 4);
  EXPECT_GE(planned(step, "state"), 2 * 7872 * 4);
}

// Verify the 124M plan (B=4, T=64 to keep the test small) the same way.
TEST_F(GPT2Test, GPT2TrainStepPlanIsValid) {
  ASSERT_TRUE(compile("124M", Phase::MemoryPlan, [](CompileOptions &o) {
    o.batch = 4;
    o.seq = 64;
  }));
  mlir::func::FuncOp step = function("train_step");
  EXPECT_TRUE(mlir::succeeded(verifyMemoryPlan(step))) << diagnostics;
  expectTightPlan(step);
  EXPECT_GE(planned(step, "params"), int64_t{124475904} * 4);
}

// Verify that inlining for the plan keeps the train step's numerics: the
// planned, inlined @train_step gives the same loss as before the phase.
TEST_F(GPT2FixtureTest, InlinedTrainStepComputesTheSameLoss) {
  auto lossAt = [&](Phase phase) {
    if (!compile("tiny", phase))
      return -1.0;
    mlir::func::FuncOp step = function("train_step");
    std::vector<Tensor> args;
    for (int role = 0; role < 3; ++role)
      for (unsigned i = 0; i < step.getNumArguments(); ++i)
        if (auto name = step.getArgAttrOfType<mlir::StringAttr>(i, mlir::gpt::kParamAttrName))
          args.push_back(role == 0 ? fixture.params.at(name.str())
                                   : Tensor(fixture.params.at(name.str()).shape, 0.0));
    args.push_back(Tensor({1, 2, 8}, fixture.tokens));
    args.push_back(Tensor({1, 2, 8}, fixture.targets));
    args.emplace_back(std::vector<int64_t>{}, 0.0); // step
    args.emplace_back(std::vector<int64_t>{}, 1.0); // lr_scale
    auto out = evaluate("train_step", args);
    return out.empty() ? -1.0 : out[output("train_step", "loss")].data[0];
  };
  double before = lossAt(Phase::TrainStep);
  bool inlined = true;
  double after = lossAt(Phase::MemoryPlan);
  function("train_step").walk([&](mlir::func::CallOp) { inlined = false; });
  EXPECT_TRUE(inlined);
  EXPECT_DOUBLE_EQ(before, after);
  EXPECT_NEAR(after, fixture.lossFp64, 1e-10);
}

} // namespace

//===- InsertOptimizer.cpp - build @train_step around @<fn>_grad ---------===//
//
/// Algorithm:
///  1) Arguments: params (as @f), their AdamW moments m and v, tokens and
///     targets as (accum_steps, B, T), the 0-based step.
///  2) For each micro-batch: slice + reshape its tokens/targets, call
///     @f_grad, sum loss and gradients. Divide the loss by accum_steps.
///  3) grad_norm = ||sum g|| / (accum_steps * loss_scale); grad_scale =
///     clip / (accum_steps * loss_scale): the gradients arrive multiplied
///     by the loss scale gpt-autodiff seeded the backward with.
///  4) lr = gpt.lr_schedule(step) * lr_scale; one gpt.adamw per parameter.
///  5) Return the new state, then loss, grad_norm and lr (for the logs).
//
//===----------------------------------------------------------------------===//

#include "compiler/Transforms/Passes.h"
#include "compiler/Transforms/ProgramUtils.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/SymbolTable.h"

#include <cmath>
#include <limits>

namespace gptc {
#define GEN_PASS_DEF_INSERTOPTIMIZERPASS
#include "compiler/Transforms/Passes.h.inc"
} // namespace gptc

using namespace mlir;
using namespace mlir::gpt;

namespace {

/// Micro-batches per step at most: @train_step holds one copy of the forward
/// and backward graph per micro-batch (10^6 took minutes before failing).
constexpr int64_t kMaxAccumSteps = 1024;

struct InsertOptimizerPass
    : public gptc::impl::InsertOptimizerPassBase<InsertOptimizerPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (failed(build(module)))
      signalPassFailure();
  }

  LogicalResult build(ModuleOp module) {
    SymbolTable symbols(module);
    std::string gradName = function + "_grad";
    auto grad = symbols.lookup<func::FuncOp>(gradName);
    if (!grad)
      return module.emitError("gpt-insert-optimizer: no @")
             << gradName << " (run gpt-autodiff first)";
    if (symbols.lookup("train_step"))
      return module.emitError("gpt-insert-optimizer: @train_step already exists");
    std::optional<ScheduleKind> kind = symbolizeScheduleKind(schedule);
    if (!kind)
      return module.emitError("gpt-insert-optimizer: schedule must be constant, "
                              "cosine or linear, got '")
             << schedule << "'";
    // Each micro-batch is a copy of the forward and backward graph.
    if (accumSteps < 1 || accumSteps > kMaxAccumSteps)
      return module.emitError("gpt-insert-optimizer: accum-steps must be in 1..")
             << kMaxAccumSteps << " (the step is unrolled per micro-batch), got "
             << static_cast<int64_t>(accumSteps);
    // Scaled fp32 gradients past 3.4e38 are infinite before any step.
    if (!(lossScale > 0) || !(lossScale <= double(std::numeric_limits<float>::max())))
      return module.emitError("gpt-insert-optimizer: loss-scale must be a number in (0, 3.4e38] "
                              "(fp32's range), got ")
             << lossScale;
    if (*kind != ScheduleKind::Constant && totalSteps <= warmupSteps)
      return module.emitError("gpt-insert-optimizer: a ")
             << schedule << " schedule needs total-steps > warmup-steps";
    if (warmupSteps < 0 || totalSteps < 0)
      return module.emitError("gpt-insert-optimizer: warmup-steps and total-steps must be "
                              ">= 0, got ")
             << static_cast<int64_t>(warmupSteps) << " and " << static_cast<int64_t>(totalSteps);
    // Each range is written so that NaN fails it.
    struct Range {
      StringRef name;
      double value;
      bool ok;
      StringRef want;
    };
    for (const Range &r :
         {Range{"lr", lr, std::isfinite(lr) && lr > 0, "a finite number > 0"},
          // A constant schedule never reaches min-lr.
          Range{"min-lr", minLr,
                minLr >= 0 && (*kind == ScheduleKind::Constant || minLr <= lr),
                "in [0, lr] for a decaying schedule"},
          Range{"beta1", beta1, beta1 >= 0 && beta1 < 1, "in [0, 1)"},
          Range{"beta2", beta2, beta2 >= 0 && beta2 < 1, "in [0, 1)"},
          Range{"epsilon", epsilon, std::isfinite(epsilon) && epsilon > 0, "a finite number > 0"},
          Range{"weight-decay", weightDecay, std::isfinite(weightDecay) && weightDecay >= 0,
                "a finite number >= 0"},
          Range{"grad-clip", gradClip, std::isfinite(gradClip) && gradClip >= 0,
                "a finite number >= 0 (0: off)"}})
      if (!r.ok)
        return module.emitError("gpt-insert-optimizer: ")
               << r.name << " must be " << r.want << ", got " << r.value;

    // The gradient function's arguments: data inputs and parameters.
    MLIRContext *ctx = module.getContext();
    Builder b(ctx);
    struct Param {
      unsigned gradArg;
      std::string name;
      RankedTensorType type;
    };
    SmallVector<Param> params;
    int tokensArg = -1, targetsArg = -1;
    for (unsigned i = 0; i < grad.getNumArguments(); ++i) {
      auto type = llvm::dyn_cast<RankedTensorType>(grad.getArgumentTypes()[i]);
      if (!type)
        return grad.emitError("gpt-insert-optimizer: argument ")
               << i << " must be a ranked tensor, got " << grad.getArgumentTypes()[i];
      if (auto p = grad.getArgAttrOfType<StringAttr>(i, kParamAttrName))
        params.push_back({i, p.str(), type});
      else if (auto in = grad.getArgAttrOfType<StringAttr>(i, kInputAttrName);
               in && in.getValue() == "tokens")
        tokensArg = i;
      else if (in && in.getValue() == "targets")
        targetsArg = i;
      else
        return grad.emitError("gpt-insert-optimizer: argument ")
               << i << " is neither a parameter nor tokens/targets";
    }
    if (tokensArg < 0 || targetsArg < 0)
      return grad.emitError("gpt-insert-optimizer: @")
             << gradName << " needs 'tokens' and 'targets' inputs";
    // The call results are used as the loss and the gradients below.
    FunctionType gradType = grad.getFunctionType();
    bool resultsOk = gradType.getNumResults() == 1 + params.size() &&
                     gradType.getResult(0) == RankedTensorType::get({}, b.getF32Type());
    for (size_t i = 0; resultsOk && i < params.size(); ++i)
      resultsOk = gradType.getResult(1 + i) == params[i].type;
    if (!resultsOk)
      return grad.emitError("gpt-insert-optimizer: @")
             << gradName << " must return a tensor<f32> loss, then one gradient "
             << "per parameter with the parameter's type";

    // Signature.
    auto batchType = llvm::cast<RankedTensorType>(grad.getArgumentTypes()[tokensArg]);
    SmallVector<int64_t> microShape = {accumSteps};
    llvm::append_range(microShape, batchType.getShape());
    auto microType = RankedTensorType::get(microShape, batchType.getElementType());
    auto stepType = RankedTensorType::get({}, b.getI32Type());
    auto f32 = RankedTensorType::get({}, b.getF32Type());

    SmallVector<Type> argTypes, resultTypes;
    SmallVector<Attribute> argAttrs, resultAttrs;
    auto named = [&](StringRef key, const Twine &value) {
      return b.getDictionaryAttr(b.getNamedAttr(key, b.getStringAttr(value)));
    };
    for (const char *role : {"", ".adam_m", ".adam_v"})
      for (const Param &p : params) {
        argTypes.push_back(p.type);
        resultTypes.push_back(p.type);
        DictionaryAttr attr = *role ? named(gptc::kStateAttrName, p.name + role)
                                    : named(kParamAttrName, p.name);
        argAttrs.push_back(attr);
        resultAttrs.push_back(attr);
      }
    argTypes.append({microType, microType, stepType, f32});
    argAttrs.append({named(kInputAttrName, "tokens"), named(kInputAttrName, "targets"),
                     named(kInputAttrName, "step"), named(kInputAttrName, "lr_scale")});
    resultTypes.append({f32, f32, f32});
    resultAttrs.append({named(gptc::kOutputAttrName, "loss"),
                        named(gptc::kOutputAttrName, "grad_norm"),
                        named(gptc::kOutputAttrName, "lr")});

    OpBuilder ob(ctx);
    ob.setInsertionPointToEnd(module.getBody());
    Location loc = grad.getLoc();
    auto step = func::FuncOp::create(ob, loc, "train_step",
                                     ob.getFunctionType(argTypes, resultTypes));
    step.setAllArgAttrs(argAttrs);
    step.setAllResultAttrs(resultAttrs);
    step->setAttr(gptc::kTrainStepAttr, ob.getUnitAttr());
    // The gradient is the step's callee now, not a program: the inliner
    // drops it, so every function left is one gptrun runs.
    grad.setPrivate();
    Block *entry = step.addEntryBlock();
    ob.setInsertionPointToStart(entry);

    size_t n = params.size();
    auto paramArg = [&](size_t i) { return entry->getArgument(i); };
    auto mArg = [&](size_t i) { return entry->getArgument(n + i); };
    auto vArg = [&](size_t i) { return entry->getArgument(2 * n + i); };
    Value tokens = entry->getArgument(3 * n), targets = entry->getArgument(3 * n + 1);
    Value stepArg = entry->getArgument(3 * n + 2);
    Value lrScale = entry->getArgument(3 * n + 3);

    // Micro-batches: sum of losses and gradients.
    Value lossSum;
    SmallVector<Value> gradSum(n);
    for (int64_t a = 0; a < accumSteps; ++a) {
      auto micro = [&](Value all) -> Value {
        Value s = SliceOp::create(ob, loc, all, /*dim=*/0, /*start=*/a, /*size=*/1);
        return ReshapeOp::create(ob, loc, batchType, s);
      };
      SmallVector<Value> callArgs(grad.getNumArguments());
      callArgs[tokensArg] = micro(tokens);
      callArgs[targetsArg] = micro(targets);
      for (size_t i = 0; i < n; ++i)
        callArgs[params[i].gradArg] = paramArg(i);
      auto call = func::CallOp::create(ob, loc, grad, callArgs);
      auto add = [&](Value acc, Value v) -> Value {
        if (!acc)
          return v;
        auto sum = AddOp::create(ob, loc, acc, v);
        sum->setAttr(kMicroBatchAttrName, ob.getI64IntegerAttr(a));
        return sum.getResult();
      };
      lossSum = add(lossSum, call.getResult(0));
      for (size_t i = 0; i < n; ++i)
        gradSum[i] = add(gradSum[i], call.getResult(1 + i));
    }
    double inv = 1.0 / static_cast<double>(accumSteps);
    Value loss = accumSteps > 1 ? ScaleOp::create(ob, loc, lossSum, ob.getF64FloatAttr(inv)).getResult()
                                : lossSum;
    // From here on `inv` also divides out the loss scale.
    inv /= lossScale;
    Value norm = GlobalNormOp::create(ob, loc, f32, gradSum);
    if (inv != 1.0)
      norm = ScaleOp::create(ob, loc, norm, ob.getF64FloatAttr(inv));

    // grad_scale = (clip / max(norm, clip)) / (accum_steps * loss_scale).
    Value gradScale;
    if (gradClip > 0) {
      Value clip = ConstantOp::create(ob, loc, f32, ob.getF64FloatAttr(gradClip));
      Value factor = DivOp::create(ob, loc, clip, MaxOp::create(ob, loc, norm, clip));
      gradScale = ScaleOp::create(ob, loc, factor, ob.getF64FloatAttr(inv));
    } else {
      gradScale = ConstantOp::create(ob, loc, f32, ob.getF64FloatAttr(inv));
    }
    // The runtime scales the compiled schedule (gptrun --lr) without a
    // recompile; 1.0 runs it as compiled.
    Value lrValue = MulOp::create(
        ob, loc,
        LRScheduleOp::create(ob, loc, f32, ScheduleKindAttr::get(ctx, *kind), stepArg,
                             ob.getF64FloatAttr(lr), ob.getF64FloatAttr(minLr),
                             ob.getI64IntegerAttr(warmupSteps), ob.getI64IntegerAttr(totalSteps)),
        lrScale);

    SmallVector<Value> newParams, newM, newV;
    for (size_t i = 0; i < n; ++i) {
      bool decay = params[i].type.getRank() >= 2 &&
                   !llvm::is_contained(noDecay, params[i].name);
      auto adam = AdamWOp::create(
          ob, loc, paramArg(i), gradSum[i], mArg(i), vArg(i), lrValue, stepArg, gradScale,
          ob.getF64FloatAttr(beta1), ob.getF64FloatAttr(beta2), ob.getF64FloatAttr(epsilon),
          ob.getF64FloatAttr(decay ? weightDecay : 0.0));
      newParams.push_back(adam.getNewParam());
      newM.push_back(adam.getNewM());
      newV.push_back(adam.getNewV());
    }
    SmallVector<Value> results = newParams;
    results.append(newM);
    results.append(newV);
    results.append({loss, norm, lrValue});
    func::ReturnOp::create(ob, loc, results);
    // For the runtime's logs and --lr: the compiled hyper-parameters.
    module->setAttr("gpt.optimizer",
                    ob.getDictionaryAttr({ob.getNamedAttr("lr", ob.getF64FloatAttr(lr)),
                                          ob.getNamedAttr("min_lr", ob.getF64FloatAttr(minLr)),
                                          ob.getNamedAttr("beta1", ob.getF64FloatAttr(beta1)),
                                          ob.getNamedAttr("beta2", ob.getF64FloatAttr(beta2)),
                                          ob.getNamedAttr("epsilon", ob.getF64FloatAttr(epsilon)),
                                          ob.getNamedAttr("weight_decay", ob.getF64FloatAttr(weightDecay)),
                                          ob.getNamedAttr("grad_clip", ob.getF64FloatAttr(gradClip)),
                                          ob.getNamedAttr("loss_scale", ob.getF64FloatAttr(lossScale)),
                                          ob.getNamedAttr("warmup_steps", ob.getF64FloatAttr(warmupSteps)),
                                          ob.getNamedAttr("total_steps", ob.getF64FloatAttr(totalSteps)),
                                          // ScheduleKind's value: constant 0, cosine 1, linear 2.
                                          ob.getNamedAttr("schedule", ob.getF64FloatAttr(static_cast<double>(*kind))),
                                          ob.getNamedAttr("accum_steps", ob.getF64FloatAttr(accumSteps))}));
    return success();
  }
};

} // namespace

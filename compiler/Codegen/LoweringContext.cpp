//===- LoweringContext.cpp - waits for collectives, the registry ---------===//

#include "compiler/Codegen/LoweringContext.h"

#include "llvm/ADT/STLExtras.h"

namespace gptc::codegen {

/// The compute stream waits for the collectives whose results `operands`
/// read, once per event.
void LoweringContext::waitFor(ValueRange operands) {
  for (Value v : operands) {
    auto it = pending.find(v);
    if (it == pending.end())
      continue;
    unsigned event = it->second;
    Command wait{Command::Wait, 0, 0, 0, {}, "gpt.all_reduce", kComputeStream, event};
    wait.source = eventOps.lookup(event);
    program->commands.push_back(wait);
    llvm::SmallVector<Value> done;
    for (auto &[value, e] : pending)
      if (e == event)
        done.push_back(value);
    for (Value d : done)
      pending.erase(d);
  }
}

/// The compute stream waits for every collective not yet waited for, in
/// the order their events were recorded (not the map's, which follows
/// pointer values and changed from one compile to the next).
void LoweringContext::waitForAll() {
  llvm::SmallVector<std::pair<unsigned, Value>> events;
  for (auto &entry : pending)
    events.push_back({entry.second, entry.first});
  llvm::sort(events, [](const auto &a, const auto &b) { return a.first < b.first; });
  llvm::SmallVector<Value> values;
  for (auto &entry : events)
    values.push_back(entry.second);
  waitFor(values);
}

LogicalResult LoweringContext::mapResults(Operation *op) {
  auto offsets = op->getAttrOfType<DenseI64ArrayAttr>("gpt.offsets");
  if (!offsets)
    return op->emitOpError("codegen: no gpt.offsets (run gpt-plan-memory)");
  // Views live in their source's bytes.
  if (llvm::isa<ReshapeOp>(op) ||
      (llvm::isa<SliceOp>(op) && llvm::cast<SliceOp>(op).getDim() == 0)) {
    Value src = op->getOperand(0);
    TensorInfo info = result.tensors[tensorOf.lookup(src)];
    if (auto s = llvm::dyn_cast<SliceOp>(op))
      info.offset += s.getStart() * bytesOf(src.getType()) / rtt(src).getDimSize(0);
    auto shape = rtt(op->getResult(0)).getShape();
    info.shape.assign(shape.begin(), shape.end());
    info.bytes = bytesOf(op->getResult(0).getType());
    info.name += ".view";
    tensorOf[op->getResult(0)] = addTensor(info);
    if (auto it = pending.find(src); it != pending.end())
      pending[op->getResult(0)] = it->second;
    return success();
  }
  // A result that gpt-plan-memory put in its operand's bytes (the same
  // offset, or -1 where the operand is an argument's) is that tensor.
  auto mapInPlace = [&](Value operand, Value r) {
    const TensorInfo &src = result.tensors[tensorOf.lookup(operand)];
    int64_t off = offsets[llvm::cast<OpResult>(r).getResultNumber()];
    if (off < 0 || (src.pool == "activations" && src.offset == off))
      tensorOf[r] = tensorOf.lookup(operand);
  };
  // An all-reduce's results, and an FP8 amax history's next value.
  if (auto ar = llvm::dyn_cast<AllReduceOp>(op))
    for (auto [in, r] : llvm::zip(ar.getInputs(), ar.getResults()))
      mapInPlace(in, r);
  if (auto gather = llvm::dyn_cast<AllGatherOp>(op))
    for (auto [init, r] : llvm::zip(gather.getInits(), gather.getResults()))
      mapInPlace(init, r);
  if (auto [history, next] = getFp8History(op); history)
    mapInPlace(history, next);
  if (auto scales = llvm::dyn_cast<Fp8DelayedScalesOp>(op))
    for (auto [i, h] : llvm::enumerate(scales.getHistories()))
      mapInPlace(h, scales.getShifted(i));
  if (auto mm = llvm::dyn_cast<ScaledMatmulOp>(op); mm && mm.getAccumulate())
    mapInPlace(mm.getAccumulate(), mm.getResult());
  if (auto adam = llvm::dyn_cast<AdamWOp>(op); adam && offsets[0] < 0) {
    // In place: the new parameter and moments are the arguments' tensors.
    // A named vector: a braced ValueRange in the loop header would dangle.
    SmallVector<Value, 3> sources = {adam.getParam(), adam.getM(), adam.getV()};
    for (auto [r, src] : llvm::zip(adam->getResults(), sources))
      tensorOf[r] = tensorOf.lookup(src);
    return success();
  }
  if (auto multi = llvm::dyn_cast<AdamWMultiOp>(op)) {
    // Results are new params, ms, vs; -1: in place in that argument.
    size_t n = multi.getParams().size();
    for (auto [j, r] : llvm::enumerate(op->getResults())) {
      if (offsets[j] >= 0)
        continue;
      OperandRange sources = j < n ? multi.getParams() : j < 2 * n ? multi.getMs() : multi.getVs();
      tensorOf[r] = tensorOf.lookup(sources[j % n]);
    }
  }
  for (auto [r, off] : llvm::zip(op->getResults(), offsets.asArrayRef())) {
    if (tensorOf.count(r))
      continue; // in place, mapped above
    if (off < 0)
      return op->emitOpError("codegen: result planned inside an argument");
    auto shape = rtt(r).getShape();
    tensorOf[r] = addTensor({"%" + std::to_string(result.tensors.size()), "activations",
                             "activations", eltOf(r),
                             std::vector<int64_t>(shape.begin(), shape.end()), off,
                             bytesOf(r.getType())});
  }
  return success();
}

void LoweringRegistry::add(TypeID op, const LoweringFn &fn) {
  [[maybe_unused]] bool inserted = entries.try_emplace(op, fn).second;
  assert(inserted && "an op class with two lowerings");
}

const LoweringFn *LoweringRegistry::lookup(Operation *op) const {
  auto it = entries.find(op->getName().getTypeID());
  return it == entries.end() ? nullptr : &it->second;
}

} // namespace gptc::codegen

//===- BufferLiveness.cpp - activation buffers and their live intervals ---===//

#include "compiler/Transforms/BufferLiveness.h"
#include "compiler/Transforms/ProgramUtils.h"

#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <map>
#include <tuple>

using namespace mlir;
using namespace mlir::gpt;

namespace gptc {

int64_t tensorBytes(Type t) {
  auto shaped = llvm::cast<ShapedType>(t);
  int64_t bits = shaped.getElementTypeBitWidth();
  return shaped.getNumElements() * std::max<int64_t>(bits / 8, 1);
}

static int64_t alignTo(int64_t x, int64_t a) { return (x + a - 1) / a * a; }

std::optional<std::pair<Value, int64_t>> viewSource(Operation *op) {
  if (auto r = llvm::dyn_cast<ReshapeOp>(op))
    return std::make_pair(r.getInput(), int64_t{0});
  if (auto s = llvm::dyn_cast<SliceOp>(op); s && s.getDim() == 0) {
    auto t = s.getInput().getType();
    return std::make_pair(s.getInput(), s.getStart() * tensorBytes(t) / t.getDimSize(0));
  }
  return std::nullopt;
}

bool reducesInPlace(AllReduceOp op, unsigned i) {
  Value in = op.getInputs()[i];
  Operation *def = in.getDefiningOp();
  return def && in.hasOneUse() && !viewSource(def) &&
         !llvm::isa<AdamWOp, AdamWMultiOp, AllReduceOp, AllGatherOp>(def);
}

/// `op` may write over `v`'s bytes: `v` is the result of an op of its
/// block that owns its buffer (not an argument, a view, or an update in
/// place in an argument), and nothing but `op` reads it from `op` on.
static bool lastReadBy(Value v, Operation *op) {
  Operation *def = v.getDefiningOp();
  if (!def || viewSource(def) || def->getBlock() != op->getBlock() ||
      llvm::isa<AdamWOp, AdamWMultiOp, AllReduceOp, AllGatherOp>(def))
    return false;
  for (Operation *user : v.getUsers())
    if (user != op && (user->getBlock() != op->getBlock() || viewSource(user) ||
                       !user->isBeforeInBlock(op)))
      return false;
  return true;
}

/// The logits' bytes can take the gradient: the same size, owned by the
/// op that made them (not a view or another in-place result), and read
/// by nothing after the gradient.
static bool gradOverwritesLogits(CrossEntropyGradOp ce) {
  Value logits = ce.getLogits();
  return !llvm::isa_and_nonnull<CrossEntropyGradOp>(logits.getDefiningOp()) &&
         tensorBytes(logits.getType()) == tensorBytes(ce.getType()) && lastReadBy(logits, ce);
}

/// An FP8 history's next value (a scale's shifted, a quantization's
/// recorded) can take its bytes when nothing reads the history after the
/// op and it is not a view: each step's histories stay in the state.
static Value historyOverwritten(OpResult r) {
  Operation *op = r.getOwner();
  Value h;
  if (auto scales = llvm::dyn_cast<Fp8DelayedScalesOp>(op)) {
    unsigned n = scales.getHistories().size();
    if (r.getResultNumber() < 2 * n)
      return {};
    h = scales.getHistories()[r.getResultNumber() - 2 * n];
  } else if (auto [history, next] = getFp8History(op); history && r == next) {
    h = history;
  } else {
    return {};
  }
  if (Operation *def = h.getDefiningOp(); def && viewSource(def))
    return {};
  for (Operation *user : h.getUsers())
    if (user != op && (user->getBlock() != op->getBlock() || !user->isBeforeInBlock(op)))
      return {};
  return h;
}

/// A GEMM's accumulator can take its result (cuBLASLt's C is D) when the
/// GEMM reads it last.
static Value accumulatorOverwritten(ScaledMatmulOp mm) {
  Value acc = mm.getAccumulate();
  return acc && lastReadBy(acc, mm) ? acc : Value();
}

Value overwrittenOperand(OpResult r) {
  Operation *op = r.getOwner();
  if (Value history = historyOverwritten(r))
    return history;
  if (auto mm = llvm::dyn_cast<ScaledMatmulOp>(op))
    return accumulatorOverwritten(mm);
  if (auto ar = llvm::dyn_cast<AllReduceOp>(op))
    return reducesInPlace(ar, r.getResultNumber()) ? ar.getInputs()[r.getResultNumber()]
                                                   : Value();
  if (auto ce = llvm::dyn_cast<CrossEntropyGradOp>(op))
    return gradOverwritesLogits(ce) ? ce.getLogits() : Value();
  return {};
}

SmallVector<Value, 1> aliasesOf(Operation *user, Value v) {
  SmallVector<Value, 1> out;
  if (viewSource(user)) {
    out.push_back(user->getResult(0));
    return out;
  }
  for (OpResult r : user->getResults())
    if (overwrittenOperand(r) == v)
      out.push_back(r);
  return out;
}

int64_t BufferLiveness::lastUse(Value v) const {
  int64_t last = index.lookup(v.getDefiningOp());
  for (Operation *user : v.getUsers()) {
    if (llvm::isa<func::ReturnOp>(user))
      return numPoints;
    last = std::max(last, index.lookup(user));
    // ZeRO-1's collectives read their inputs on the communication stream
    // until the compute stream waits for them: at the first read of a
    // result (codegen's waitFor), at the latest.
    if (llvm::isa<ReduceScatterOp, AllGatherOp>(user)) {
      int64_t wait = numPoints;
      for (Value r : user->getResults())
        for (Operation *reader : r.getUsers())
          wait = std::min(wait, llvm::isa<func::ReturnOp>(reader) ? numPoints
                                                                  : index.lookup(reader));
      last = std::max(last, wait);
    }
    for (Value alias : aliasesOf(user, v))
      last = std::max(last, lastUse(alias));
  }
  return last;
}

/// AdamW may overwrite its parameter and moments when it reads them last
/// and they are arguments (no other op's buffer is involved).
bool BufferLiveness::adamInPlace(AdamWOp adam) const {
  return adamInPlace({adam.getParam(), adam.getM(), adam.getV()}, adam);
}

bool BufferLiveness::adamInPlace(ArrayRef<Value> sources, Operation *adam) const {
  for (Value v : sources) {
    if (!llvm::isa<BlockArgument>(v))
      return false;
    for (Operation *user : v.getUsers())
      if (user != adam && index.lookup(user) > index.lookup(adam))
        return false;
  }
  return true;
}

int64_t BufferLiveness::argumentBytes() const {
  int64_t total = 0;
  for (BlockArgument arg : const_cast<func::FuncOp &>(fn).getBody().front().getArguments())
    total += alignTo(tensorBytes(arg.getType()), alignment);
  return total;
}

FailureOr<BufferLiveness> BufferLiveness::compute(func::FuncOp fn, int64_t alignment,
                                                  StringRef pass) {
  BufferLiveness l;
  l.fn = fn;
  l.alignment = alignment;
  Block &body = fn.getBody().front();
  for (Operation &op : body)
    l.index[&op] = l.numPoints++;
  for (BlockArgument arg : body.getArguments())
    l.homes[arg] = BufferHome{-1, arg, 0};

  for (Operation &op : body.without_terminator()) {
    if (llvm::isa<func::CallOp>(op))
      return op.emitOpError() << pass << ": inline calls first";
    if (auto view = viewSource(&op)) {
      BufferHome h = l.homes.lookup(view->first);
      h.viewOffset += view->second;
      l.homes[op.getResult(0)] = h;
      continue;
    }
    if (auto adam = llvm::dyn_cast<AdamWOp>(op); adam && l.adamInPlace(adam)) {
      // A named vector: a braced ValueRange in the loop header would dangle.
      SmallVector<Value, 3> sources = {adam.getParam(), adam.getM(), adam.getV()};
      for (auto [res, src] : llvm::zip(adam->getResults(), sources))
        l.homes[res] = l.homes.lookup(src);
      continue;
    }
    // ZeRO-1's gather writes each parameter over the old one, read last.
    if (auto gather = llvm::dyn_cast<AllGatherOp>(op)) {
      for (auto [res, init] : llvm::zip(gather.getResults(), gather.getInits())) {
        if (l.adamInPlace({init}, &op)) {
          l.homes[res] = l.homes.lookup(init);
          continue;
        }
        l.homes[res] = BufferHome{static_cast<int>(l.buffers.size()), BlockArgument(), 0};
        l.buffers.push_back({res, alignTo(tensorBytes(res.getType()), alignment), l.index[&op],
                             l.lastUse(res), -1});
      }
      continue;
    }
    // gpt.adamw_multi: each parameter like its own gpt.adamw.
    if (auto multi = llvm::dyn_cast<AdamWMultiOp>(op)) {
      for (size_t i = 0; i < multi.getParams().size(); ++i) {
        SmallVector<Value, 3> sources = {multi.getParams()[i], multi.getMs()[i],
                                         multi.getVs()[i]};
        SmallVector<Value, 3> results = {multi.getNewParams()[i], multi.getNewMs()[i],
                                         multi.getNewVs()[i]};
        // Each array on its own: under ZeRO-1 the parameter is a slice (a
        // buffer of its own), the moments are still arguments.
        for (auto [res, src] : llvm::zip(results, sources)) {
          if (l.adamInPlace({src}, &op)) {
            l.homes[res] = l.homes.lookup(src);
            continue;
          }
          l.homes[res] = BufferHome{static_cast<int>(l.buffers.size()), BlockArgument(), 0};
          l.buffers.push_back({res, alignTo(tensorBytes(res.getType()), alignment), l.index[&op],
                               l.lastUse(res), -1});
        }
      }
      continue;
    }
    for (OpResult r : op.getResults()) {
      if (Value src = overwrittenOperand(r)) {
        l.homes[r] = l.homes.lookup(src);
        continue;
      }
      l.homes[r] = BufferHome{static_cast<int>(l.buffers.size()), BlockArgument(), 0};
      l.buffers.push_back(
          {r, alignTo(tensorBytes(r.getType()), alignment), l.index[&op], l.lastUse(r), -1});
    }
  }

  std::tie(l.peakBytes, l.peakPoint) = peakLiveBytes(l.buffers, l.numPoints);
  for (auto [i, b] : llvm::enumerate(l.buffers))
    if (b.first <= l.peakPoint && l.peakPoint <= b.last)
      l.liveAtPeak.push_back(static_cast<int>(i));
  return l;
}

std::pair<int64_t, int64_t> peakLiveBytes(llvm::ArrayRef<LiveBuffer> buffers, int64_t numPoints) {
  // Bytes live at each point: +size at first, -size after last.
  std::vector<int64_t> delta(numPoints + 2, 0);
  for (const LiveBuffer &b : buffers) {
    delta[b.first] += b.size;
    delta[b.last + 1] -= b.size;
  }
  int64_t live = 0, peak = 0, point = 0;
  for (int64_t p = 0; p <= numPoints; ++p) {
    live += delta[p];
    if (live > peak) {
      peak = live;
      point = p;
    }
  }
  return {peak, point};
}

int64_t placeBuffers(std::vector<LiveBuffer> &buffers) {
  std::vector<int> order(buffers.size());
  for (size_t i = 0; i < order.size(); ++i)
    order[i] = static_cast<int>(i);
  std::stable_sort(order.begin(), order.end(),
                   [&](int a, int b) { return buffers[a].size > buffers[b].size; });
  std::vector<int> placed;
  int64_t peak = 0;
  for (int i : order) {
    LiveBuffer &buf = buffers[i];
    std::vector<std::pair<int64_t, int64_t>> busy; // [offset, end) of live neighbours
    for (int j : placed)
      if (buffers[j].first <= buf.last && buf.first <= buffers[j].last)
        busy.push_back({buffers[j].offset, buffers[j].offset + buffers[j].size});
    std::sort(busy.begin(), busy.end());
    int64_t offset = 0;
    for (auto [lo, hi] : busy) {
      if (offset + buf.size <= lo)
        break;
      offset = std::max(offset, hi);
    }
    buf.offset = offset;
    peak = std::max(peak, offset + buf.size);
    placed.push_back(i);
  }
  return peak;
}

std::string describePeak(const BufferLiveness &l, size_t top) {
  struct Group {
    std::string name;
    int64_t bytes = 0, count = 0;
  };
  std::map<std::string, Group> groups;
  for (int b : l.liveAtPeak) {
    const LiveBuffer &buf = l.buffers[b];
    std::string name;
    llvm::raw_string_ostream os(name);
    os << opKindName(buf.value.getDefiningOp()) << " "
       << llvm::cast<ShapedType>(buf.value.getType()).getElementType();
    Group &g = groups[name];
    g.name = name;
    g.bytes += buf.size;
    ++g.count;
  }
  std::vector<Group> sorted;
  for (auto &[name, g] : groups)
    sorted.push_back(g);
  llvm::stable_sort(sorted, [](const Group &a, const Group &b) { return a.bytes > b.bytes; });
  std::string out;
  int64_t rest = 0, restCount = 0;
  for (auto [i, g] : llvm::enumerate(sorted)) {
    if (i >= top) {
      rest += g.bytes;
      restCount += g.count;
      continue;
    }
    out += llvm::formatv("{0}{1} {2} x{3}", out.empty() ? "" : ", ", g.name,
                         formatBytes(g.bytes), g.count)
               .str();
  }
  if (restCount)
    out += llvm::formatv(", others {0} x{1}", formatBytes(rest), restCount).str();
  return out;
}

} // namespace gptc

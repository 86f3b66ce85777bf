//===- OptimizerLowering.cpp - gpt.adamw_multi as one kernel launch -----===//

#include "compiler/Codegen/OptimizerLowering.h"
#include "compiler/Codegen/KernelBuilder.h"

#include "mlir/Dialect/Math/IR/Math.h"

#include <algorithm>

using namespace mlir;

namespace gptc::codegen {

int64_t AdamWLaunch::elements() const {
  int64_t n = 0;
  for (const AdamWSegment &s : segments)
    n += s.size;
  return n;
}

bool AdamWLaunch::chunked() const {
  if (!vectorAccess)
    return false;
  for (const AdamWSegment &s : segments) {
    if (s.size % kAdamWChunk)
      return false;
    for (int a = 0; a < kNumAdamWArrays; ++a)
      if (s.offsets[a] % vectorWidth(static_cast<AdamWArray>(a)))
        return false;
  }
  return !segments.empty();
}

int64_t AdamWLaunch::perThread() const {
  if (chunked())
    return kAdamWChunk;
  int64_t n = elements();
  for (int64_t u : {4, 2})
    if (n % u == 0 && n / u >= 1024)
      return u;
  return 1;
}

std::string AdamWLaunch::key() const {
  std::string k = "g" + std::to_string(elementBytes[kGrad] * 8);
  for (const AdamWSegment &s : segments) {
    k += "[" + std::to_string(s.size) + ":" + std::to_string(s.weightDecay);
    for (int64_t o : s.offsets)
      k += "," + std::to_string(o);
    k += "]";
  }
  return k;
}

std::optional<TensorInfo> spanOf(const std::vector<TensorInfo> &tensors,
                                 llvm::ArrayRef<int64_t> members, const std::string &name,
                                 std::vector<int64_t> &elementOffsets) {
  if (members.empty())
    return std::nullopt;
  const TensorInfo &first = tensors[members.front()];
  int64_t lo = first.offset, hi = first.offset + first.bytes;
  for (int64_t m : members) {
    const TensorInfo &t = tensors[m];
    if (t.pool != first.pool || t.elementType != first.elementType)
      return std::nullopt;
    lo = std::min(lo, t.offset);
    hi = std::max(hi, t.offset + t.bytes);
  }
  int64_t elt = std::max<int64_t>(first.elementType.getIntOrFloatBitWidth() / 8, 1);
  elementOffsets.clear();
  for (int64_t m : members) {
    if ((tensors[m].offset - lo) % elt)
      return std::nullopt;
    elementOffsets.push_back((tensors[m].offset - lo) / elt);
  }
  return TensorInfo{name, "activations", first.pool, first.elementType,
                    {(hi - lo) / elt}, lo, (hi - lo) / elt * elt};
}

SmallVector<Value> tableAt(KB &k, Value i, size_t n, TypeRange types,
                           function_ref<SmallVector<Value>(size_t)> entry) {
  if (n == 1)
    return entry(0);
  SmallVector<int64_t> cases;
  for (size_t j = 0; j + 1 < n; ++j)
    cases.push_back(static_cast<int64_t>(j));
  auto sw = scf::IndexSwitchOp::create(k.b, k.loc, types, i, cases, cases.size());
  OpBuilder::InsertionGuard g(k.b);
  for (size_t j = 0; j + 1 < n; ++j) {
    k.b.setInsertionPointToStart(&sw.getCaseRegions()[j].emplaceBlock());
    scf::YieldOp::create(k.b, k.loc, entry(j));
  }
  k.b.setInsertionPointToStart(&sw.getDefaultRegion().emplaceBlock());
  scf::YieldOp::create(k.b, k.loc, entry(n - 1));
  return SmallVector<Value>(sw.getResults());
}

namespace {

/// The index of the segment holding element `idx`: a branchless binary
/// search over the segments' first elements, one table load per step.
Value segmentIndex(KB &k, Value idx, ArrayRef<int64_t> starts) {
  int64_t n = static_cast<int64_t>(starts.size());
  // starts[i] for 1 <= i < n.
  auto startAt = [&](Value i) {
    return tableAt(k, k.sub(i, k.idx(1)), n - 1, k.b.getIndexType(), [&](size_t j) {
      return SmallVector<Value>{k.idx(starts[j + 1])};
    })[0];
  };
  Value lo = k.idx(0);
  int64_t step = 1;
  while (step * 2 < n)
    step *= 2;
  for (; step >= 1; step /= 2) {
    // Move to lo + step when that segment exists and starts at or before idx.
    Value cand = k.add(lo, k.idx(step));
    Value exists = k.cmpUlt(cand, k.idx(n));
    Value start = startAt(k.select(exists, cand, k.idx(1)));
    Value take = arith::AndIOp::create(k.b, k.loc, exists,
                                       arith::CmpIOp::create(k.b, k.loc,
                                                             arith::CmpIPredicate::uge, idx,
                                                             start));
    lo = k.select(take, cand, lo);
  }
  return lo;
}

/// What a thread needs of its segment: per array, the element offset minus
/// the segment's first element (idx + delta is the element), and the
/// weight decay, from tables indexed by the segment.
SmallVector<Value> segmentOf(KB &k, Value idx, const AdamWLaunch &launch,
                             ArrayRef<int64_t> starts) {
  Type ft = k.b.getF32Type();
  size_t n = launch.segments.size();
  SmallVector<Type> types(kNumAdamWArrays, k.b.getIndexType());
  types.push_back(ft);
  Value which = n == 1 ? k.idx(0) : segmentIndex(k, idx, starts);
  return tableAt(k, which, n, types, [&](size_t i) {
    const AdamWSegment &s = launch.segments[i];
    SmallVector<Value> out;
    for (int64_t o : s.offsets)
      out.push_back(k.idx(o - starts[i]));
    out.push_back(k.f(s.weightDecay, ft));
    return out;
  });
}

} // namespace

void buildAdamWMulti(OpBuilder &b, Location loc, Value i, ValueRange a,
                     const AdamWLaunch &launch) {
  KB k{b, loc};
  std::vector<int64_t> starts;
  int64_t n = 0;
  for (const AdamWSegment &s : launch.segments) {
    starts.push_back(n);
    n += s.size;
  }
  ValueRange scalars = a.drop_front(kNumAdamWArrays);
  // The arithmetic, operation for operation, of the gpt.adamw kernel.
  double b1 = launch.beta1, b2 = launch.beta2, eps = launch.epsilon;
  Type ft = b.getF32Type(), dt = b.getF64Type();
  Value tt = k.add(arith::SIToFPOp::create(b, loc, dt, k.ld(scalars[1], k.idx(0))), k.f(1, dt));
  Value c1 = k.trunc(k.sub(k.f(1, dt), math::PowFOp::create(b, loc, k.f(b1, dt), tt)), ft);
  Value c2 = k.trunc(k.sub(k.f(1, dt), math::PowFOp::create(b, loc, k.f(b2, dt), tt)), ft);
  Value lr = k.ld(scalars[0], k.idx(0));
  Value scale = k.ld(scalars[2], k.idx(0));
  struct Updated {
    Value p, m, v;
  };
  auto update = [&](Value g16, Value p, Value m0, Value v0, Value wd) {
    Value g = k.mul(g16, scale);
    Value m = k.add(k.mul(k.f(b1, ft), m0), k.mul(k.f(1 - b1, ft), g));
    Value v = k.add(k.mul(k.f(b2, ft), v0), k.mul(k.f(1 - b2, ft), k.mul(g, g)));
    Value upd = k.div(k.div(m, c1), k.add(k.sqrt(k.div(v, c2)), k.f(eps, ft)));
    Value np = k.sub(p, k.mul(lr, k.add(upd, k.mul(wd, p))));
    return Updated{np, m, v};
  };
  if (launch.chunked()) {
    // kAdamWChunk consecutive elements of one parameter, as 16-byte
    // vectors (offsets are multiples of their width, the spans 16-byte
    // aligned).
    Value first = k.mul(i, k.idx(kAdamWChunk));
    SmallVector<Value> seg = segmentOf(k, first, launch, starts);
    auto at = [&](AdamWArray array) { return k.add(first, seg[array]); };
    auto load = [&](AdamWArray array) {
      return k.ldConsecutive(a[array], at(array), kAdamWChunk);
    };
    auto store = [&](AdamWArray array, ArrayRef<Value> xs) {
      k.stConsecutive(xs, a[array], at(array));
    };
    SmallVector<Value> g = load(kGrad), p = load(kParam), m = load(kM), v = load(kV);
    SmallVector<Value> np, nm, nv;
    for (int64_t e = 0; e < kAdamWChunk; ++e) {
      Updated u = update(g[e], p[e], m[e], v[e], seg[kNumAdamWArrays]);
      np.push_back(u.p);
      nm.push_back(u.m);
      nv.push_back(u.v);
    }
    store(kNewParam, np);
    store(kNewM, nm);
    store(kNewV, nv);
    return;
  }
  k.storeStrided(i, launch.perThread(), launch.threads(), [&](Value idx) {
    SmallVector<Value> seg = segmentOf(k, idx, launch, starts);
    auto at = [&](AdamWArray array) { return k.add(idx, seg[array]); };
    Updated u = update(k.ld(a[kGrad], at(kGrad)), k.ld(a[kParam], at(kParam)),
                       k.ld(a[kM], at(kM)), k.ld(a[kV], at(kV)), seg[kNumAdamWArrays]);
    return SmallVector<KB::Store>{{u.p, a[kNewParam], at(kNewParam)},
                                  {u.m, a[kNewM], at(kNewM)},
                                  {u.v, a[kNewV], at(kNewV)}};
  });
}

} // namespace gptc::codegen

//===- Attention.cpp - reference causal attention -------------------------===//
//
// The fp64/fp32 reference of the Attention kernel family
// (compiler/Codegen/Kernels/Attention.cpp, FlashAttention.cpp):
// gpt.causal_attention and its gradients.
//
//===----------------------------------------------------------------------===//

#include "compiler/Reference/Evaluator.h"

#include <algorithm>
#include <limits>

namespace gptc::reference {

template <typename T>
LogicalResult Evaluator<T>::attention(CausalAttentionOp op) {
  const Buffer &qkv = in(op.getQkv());
  auto s = shapeOf(op.getQkv());
  int64_t bsz = s[0], t = s[1], c = s[2] / 3;
  FailureOr<int64_t> heads = configNumber(op, op.getNumHeads(), "num_heads");
  if (failed(heads))
    return failure();
  int64_t h = *heads, d = c / h;
  T scale = T(1) / std::sqrt(static_cast<T>(d));
  Buffer &y = out(op.getResult());
  Buffer &lse = out(op.getLse()); // (B, H, T)
  std::vector<T> p(t);
  for (int64_t b = 0; b < bsz; ++b)
    for (int64_t hd = 0; hd < h; ++hd)
      for (int64_t i = 0; i < t; ++i) {
        const T *q = &qkv[(b * t + i) * 3 * c + hd * d];
        T mx = -std::numeric_limits<T>::infinity();
        for (int64_t j = 0; j <= i; ++j) {
          const T *kj = &qkv[(b * t + j) * 3 * c + c + hd * d];
          T dot = 0;
          for (int64_t e = 0; e < d; ++e)
            dot += q[e] * kj[e];
          p[j] = dot * scale;
          mx = std::max(mx, p[j]);
        }
        T sum = 0;
        for (int64_t j = 0; j <= i; ++j) {
          p[j] = std::exp(p[j] - mx);
          sum += p[j];
        }
        lse[(b * h + hd) * t + i] = mx + std::log(sum);
        T *yi = &y[(b * t + i) * c + hd * d];
        for (int64_t j = 0; j <= i; ++j) {
          const T *vj = &qkv[(b * t + j) * 3 * c + 2 * c + hd * d];
          for (int64_t e = 0; e < d; ++e)
            yi[e] += p[j] / sum * vj[e];
        }
      }
  return success();
}

/// Recomputes everything from qkv (not from the given y and lse), so that
/// it checks the kernels that trust them.
template <typename T>
LogicalResult Evaluator<T>::attentionGrad(CausalAttentionGradOp op) {
  const Buffer &dy = in(op.getGrad()), &qkv = in(op.getQkv());
  auto s = shapeOf(op.getQkv());
  int64_t bsz = s[0], t = s[1], c = s[2] / 3;
  FailureOr<int64_t> heads = configNumber(op, op.getNumHeads(), "num_heads");
  if (failed(heads))
    return failure();
  int64_t h = *heads, d = c / h;
  T scale = T(1) / std::sqrt(static_cast<T>(d));
  Buffer &dqkv = out(op.getResult());
  std::vector<T> p(t), dp(t);
  auto at = [&](int64_t b, int64_t j, int64_t part, int64_t hd) {
    return ((b * t + j) * 3 + part) * c + hd * d;
  };
  for (int64_t b = 0; b < bsz; ++b)
    for (int64_t hd = 0; hd < h; ++hd)
      for (int64_t i = 0; i < t; ++i) {
        // Recompute the probabilities of row i (as the forward).
        const T *q = &qkv[at(b, i, 0, hd)];
        T mx = -std::numeric_limits<T>::infinity();
        for (int64_t j = 0; j <= i; ++j) {
          const T *kj = &qkv[at(b, j, 1, hd)];
          T dot = 0;
          for (int64_t e = 0; e < d; ++e)
            dot += q[e] * kj[e];
          p[j] = dot * scale;
          mx = std::max(mx, p[j]);
        }
        T sum = 0;
        for (int64_t j = 0; j <= i; ++j)
          sum += (p[j] = std::exp(p[j] - mx));
        for (int64_t j = 0; j <= i; ++j)
          p[j] /= sum;
        // dv_j += p_j dy_i;  dp_j = dy_i . v_j;  ds = p (dp - p.dp).
        const T *dyi = &dy[(b * t + i) * c + hd * d];
        T pdp = 0;
        for (int64_t j = 0; j <= i; ++j) {
          const T *vj = &qkv[at(b, j, 2, hd)];
          T *dvj = &dqkv[at(b, j, 2, hd)];
          T acc = 0;
          for (int64_t e = 0; e < d; ++e) {
            dvj[e] += p[j] * dyi[e];
            acc += dyi[e] * vj[e];
          }
          dp[j] = acc;
          pdp += p[j] * acc;
        }
        T *dq = &dqkv[at(b, i, 0, hd)];
        for (int64_t j = 0; j <= i; ++j) {
          T ds = p[j] * (dp[j] - pdp) * scale;
          const T *kj = &qkv[at(b, j, 1, hd)];
          T *dkj = &dqkv[at(b, j, 1, hd)];
          for (int64_t e = 0; e < d; ++e) {
            dq[e] += ds * kj[e];
            dkj[e] += ds * q[e];
          }
        }
      }
  return success();
}

#define INSTANTIATE(T)                                                             \
  template LogicalResult Evaluator<T>::attention(CausalAttentionOp);               \
  template LogicalResult Evaluator<T>::attentionGrad(CausalAttentionGradOp);
GPTC_REFERENCE_ELEMENT_TYPES(INSTANTIATE)
#undef INSTANTIATE

} // namespace gptc::reference

//===- AdamW.cpp - reference AdamW and the LR schedule --------------------===//
//
// The fp64/fp32 reference of the AdamW kernel family
// (compiler/Codegen/Kernels/AdamW.cpp): gpt.adamw, gpt.adamw_multi and
// gpt.lr_schedule.
//
//===----------------------------------------------------------------------===//

#include "compiler/Reference/Evaluator.h"

#include <algorithm>

namespace gptc::reference {

template <typename T>
LogicalResult Evaluator<T>::adamw(AdamWOp op) {
  update(op, op.getParam(), op.getGrad(), op.getM(), op.getV(), op.getNewParam(),
         op.getNewM(), op.getNewV(), op.getWeightDecay().convertToDouble());
  return success();
}

/// gpt.adamw_multi: each parameter exactly as its own gpt.adamw.
template <typename T>
LogicalResult Evaluator<T>::adamwMulti(AdamWMultiOp op) {
  for (size_t i = 0; i < op.getParams().size(); ++i)
    update(op, op.getParams()[i], op.getGrads()[i], op.getMs()[i], op.getVs()[i],
           op.getNewParams()[i], op.getNewMs()[i], op.getNewVs()[i],
           op.getWeightDecays()[i]);
  return success();
}

/// One AdamW update; `op` (gpt.adamw or gpt.adamw_multi) gives the shared
/// scalars and hyper-parameters.
template <typename T>
template <typename AdamOp>
void Evaluator<T>::update(AdamOp op, Value param, Value grad, Value mv, Value vv,
                          Value newParam, Value newM, Value newV, double weightDecay) {
  const Buffer &p = in(param), &g = in(grad);
  const Buffer &m = in(mv), &v = in(vv);
  T lr = in(op.getLr())[0], scale = in(op.getGradScale())[0];
  double t = static_cast<double>(in(op.getStep())[0]) + 1.0;
  T b1 = static_cast<T>(op.getBeta1().convertToDouble());
  T b2 = static_cast<T>(op.getBeta2().convertToDouble());
  T eps = static_cast<T>(op.getEpsilon().convertToDouble());
  T wd = static_cast<T>(weightDecay);
  T c1 = static_cast<T>(1.0 - std::pow(op.getBeta1().convertToDouble(), t));
  T c2 = static_cast<T>(1.0 - std::pow(op.getBeta2().convertToDouble(), t));
  Buffer &np = out(newParam);
  Buffer &nm = out(newM);
  Buffer &nv = out(newV);
  for (size_t i = 0; i < p.size(); ++i) {
    T gi = g[i] * scale;
    nm[i] = b1 * m[i] + (T(1) - b1) * gi;
    nv[i] = b2 * v[i] + (T(1) - b2) * gi * gi;
    T update = (nm[i] / c1) / (std::sqrt(nv[i] / c2) + eps);
    np[i] = p[i] - lr * (update + wd * p[i]);
  }
}

template <typename T>
LogicalResult Evaluator<T>::lrSchedule(LRScheduleOp op) {
  double step = static_cast<double>(in(op.getStep())[0]);
  double maxLr = op.getMaxLr().convertToDouble(), minLr = op.getMinLr().convertToDouble();
  double warmup = static_cast<double>(op.getWarmupSteps());
  double total = static_cast<double>(op.getTotalSteps());
  double lr = maxLr;
  if (op.getKind() != ScheduleKind::Constant) {
    if (step < warmup) {
      lr = maxLr * (step + 1) / warmup;
    } else {
      double r = total > warmup ? (step - warmup) / (total - warmup) : 1.0;
      r = std::min(1.0, std::max(0.0, r));
      lr = op.getKind() == ScheduleKind::Cosine
               ? minLr + 0.5 * (1.0 + std::cos(M_PI * r)) * (maxLr - minLr)
               : maxLr - r * (maxLr - minLr);
    }
  }
  out(op.getResult())[0] = static_cast<T>(lr);
  return success();
}

#define INSTANTIATE(T)                                           \
  template LogicalResult Evaluator<T>::adamw(AdamWOp);           \
  template LogicalResult Evaluator<T>::adamwMulti(AdamWMultiOp); \
  template LogicalResult Evaluator<T>::lrSchedule(LRScheduleOp);
GPTC_REFERENCE_ELEMENT_TYPES(INSTANTIATE)
#undef INSTANTIATE

} // namespace gptc::reference

//===- Embedding.cpp - reference embedding and its gradient ---------------===//
//
// The fp64/fp32 reference of the Embedding kernel family
// (compiler/Codegen/Kernels/Embedding.cpp): gpt.embed and gpt.embed_grad.
//
//===----------------------------------------------------------------------===//

#include "compiler/Reference/Evaluator.h"

namespace gptc::reference {

template <typename T>
LogicalResult Evaluator<T>::embed(EmbedOp op) {
  const Buffer &wte = in(op.getWte()), &wpe = in(op.getWpe()), &ids = in(op.getIds());
  auto wteShape = shapeOf(op.getWte());
  int64_t v = wteShape[0], c = wteShape[1], t = shapeOf(op.getIds())[1];
  Buffer &y = out(op.getResult());
  for (int64_t r = 0; r < static_cast<int64_t>(ids.size()); ++r) {
    int64_t id = static_cast<int64_t>(ids[r]);
    if (id < 0 || id >= v)
      return op.emitOpError("token id ") << id << " at position " << r
                                         << " is outside the vocabulary [0, " << v << ")";
    int64_t pos = r % t;
    for (int64_t i = 0; i < c; ++i)
      y[r * c + i] = wte[id * c + i] + wpe[pos * c + i];
  }
  return success();
}

template <typename T>
LogicalResult Evaluator<T>::embedGrad(EmbedGradOp op) {
  const Buffer &dy = in(op.getGrad()), &ids = in(op.getIds());
  int64_t c = shapeOf(op.getGrad())[2], t = shapeOf(op.getIds())[1];
  int64_t v = op.getVocabRows();
  Buffer &dwte = out(op.getWteGrad());
  Buffer &dwpe = out(op.getWpeGrad());
  for (int64_t r = 0; r < static_cast<int64_t>(ids.size()); ++r) {
    int64_t id = static_cast<int64_t>(ids[r]);
    if (id < 0 || id >= v)
      return op.emitOpError("token id ") << id << " at position " << r
                                         << " is outside the vocabulary [0, " << v << ")";
    for (int64_t i = 0; i < c; ++i) {
      dwte[id * c + i] += dy[r * c + i];
      dwpe[(r % t) * c + i] += dy[r * c + i];
    }
  }
  return success();
}

#define INSTANTIATE(T)                                         \
  template LogicalResult Evaluator<T>::embed(EmbedOp);         \
  template LogicalResult Evaluator<T>::embedGrad(EmbedGradOp);
GPTC_REFERENCE_ELEMENT_TYPES(INSTANTIATE)
#undef INSTANTIATE

} // namespace gptc::reference

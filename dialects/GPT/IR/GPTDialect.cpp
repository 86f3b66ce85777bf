//===- GPTDialect.cpp - gpt dialect registration and attributes ----------===//

#include "dialects/GPT/IR/GPTDialect.h"
#include "dialects/GPT/IR/GPTOps.h"

#include "mlir/Transforms/InliningUtils.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::gpt;

#include "dialects/GPT/IR/GPTDialect.cpp.inc"
#include "dialects/GPT/IR/GPTEnums.cpp.inc"
#include "dialects/GPT/IR/GPTInterfaces.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "dialects/GPT/IR/GPTAttrs.cpp.inc"

namespace {
/// Every gpt op is pure dataflow on tensors, so any of them can be inlined
/// (the train step inlines its calls of @forward_grad before planning).
struct GPTInlinerInterface : public DialectInlinerInterface {
  using DialectInlinerInterface::DialectInlinerInterface;
  bool isLegalToInline(Operation *, Region *, bool, IRMapping &) const final {
    return true;
  }
};
} // namespace

void GPTDialect::initialize() {
  addInterfaces<GPTInlinerInterface>();
  addOperations<
#define GET_OP_LIST
#include "dialects/GPT/IR/GPTOps.cpp.inc"
      >();
  addAttributes<
#define GET_ATTRDEF_LIST
#include "dialects/GPT/IR/GPTAttrs.cpp.inc"
      >();
}

std::optional<int64_t> mlir::gpt::getConfigInt(Attribute attr) {
  if (auto intAttr = llvm::dyn_cast_if_present<IntegerAttr>(attr))
    return intAttr.getInt();
  return std::nullopt;
}

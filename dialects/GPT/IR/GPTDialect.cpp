//===- GPTDialect.cpp - gpt dialect registration and attributes ----------===//

#include "dialects/GPT/IR/GPTDialect.h"
#include "dialects/GPT/IR/GPTOps.h"

#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::gpt;

#include "dialects/GPT/IR/GPTDialect.cpp.inc"
#include "dialects/GPT/IR/GPTEnums.cpp.inc"
#include "dialects/GPT/IR/GPTInterfaces.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "dialects/GPT/IR/GPTAttrs.cpp.inc"

void GPTDialect::initialize() {
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

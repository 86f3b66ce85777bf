//===- GPTDialect.h - gpt dialect, attributes and enums ------------------===//

#ifndef GPTC_DIALECTS_GPT_IR_GPTDIALECT_H
#define GPTC_DIALECTS_GPT_IR_GPTDIALECT_H

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/DialectImplementation.h"

#include "dialects/GPT/IR/GPTDialect.h.inc"
#include "dialects/GPT/IR/GPTEnums.h.inc"

#define GET_ATTRDEF_CLASSES
#include "dialects/GPT/IR/GPTAttrs.h.inc"

namespace mlir::gpt {

/// Argument attribute naming a trainable parameter ("h.0.attn.c_attn.weight").
inline constexpr llvm::StringLiteral kParamAttrName = "gpt.param";
/// Argument attribute naming a data input ("tokens", "targets").
inline constexpr llvm::StringLiteral kInputAttrName = "gpt.input";
/// Argument attribute giving a symbolic shape, e.g. "(3*C, C)".
inline constexpr llvm::StringLiteral kShapeAttrName = "gpt.shape";
/// On gradient accumulation's adds (gpt-insert-optimizer): the micro-batch
/// whose gradients they add. gpt-fuse-elementwise keeps micro-batches apart,
/// so each one's gradients die after its own adds.
inline constexpr llvm::StringLiteral kMicroBatchAttrName = "gpt.micro_batch";

/// The integer value of an attribute that may still be a `#gpt.cfg`
/// reference; std::nullopt while it is a reference.
std::optional<int64_t> getConfigInt(Attribute attr);

} // namespace mlir::gpt

#endif // GPTC_DIALECTS_GPT_IR_GPTDIALECT_H

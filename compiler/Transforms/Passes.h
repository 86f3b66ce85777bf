//===- Passes.h - gptc compiler passes -----------------------------------===//

#ifndef GPTC_COMPILER_TRANSFORMS_PASSES_H
#define GPTC_COMPILER_TRANSFORMS_PASSES_H

#include "dialects/GPT/IR/GPTOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

namespace gptc {

#define GEN_PASS_DECL
#include "compiler/Transforms/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "compiler/Transforms/Passes.h.inc"

/// Result/argument attribute names of the train step.
inline constexpr llvm::StringLiteral kGradOfAttrName = "gpt.grad_of";
inline constexpr llvm::StringLiteral kOutputAttrName = "gpt.output";
inline constexpr llvm::StringLiteral kStateAttrName = "gpt.state";

/// Checks a gpt-plan-memory result: every activation buffer lies inside the
/// pool and no two buffers that are live at once overlap. Emits an error at
/// the offending op.
mlir::LogicalResult verifyMemoryPlan(mlir::func::FuncOp fn);

/// A pattern of gpt-fuse-fp8: its label (what enable-patterns and
/// disable-patterns name), whether it runs by default, and what it does.
struct Fp8Pattern {
  llvm::StringRef label;
  bool byDefault;
  llvm::StringRef summary;
};
llvm::ArrayRef<Fp8Pattern> getFp8Patterns();
/// The pattern labelled `label`; null where none is.
const Fp8Pattern *findFp8Pattern(llvm::StringRef label);
/// Every label, comma-separated: what an error about a label lists.
std::string getFp8PatternLabels();

/// The kinds of ops gpt-mixed-precision's fp32-ops takes.
llvm::ArrayRef<llvm::StringLiteral> getFp32OpKinds();

} // namespace gptc

#endif // GPTC_COMPILER_TRANSFORMS_PASSES_H

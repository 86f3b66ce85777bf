//===- ProgramUtils.h - helpers of the passes that add programs -----------===//

#ifndef GPTC_COMPILER_TRANSFORMS_PROGRAMUTILS_H
#define GPTC_COMPILER_TRANSFORMS_PROGRAMUTILS_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"

namespace gptc {

/// @`source` of `module`, for a pass that derives @`created` from it.
/// Emits "`pass`: no function @source" or "`pass`: @created already exists"
/// on the module and returns null when either check fails.
mlir::func::FuncOp programSource(mlir::ModuleOp module, llvm::StringRef pass,
                                 llvm::StringRef source, llvm::StringRef created);

} // namespace gptc

#endif // GPTC_COMPILER_TRANSFORMS_PROGRAMUTILS_H

//===- ProgramUtils.h - helpers shared by the compiler passes -------------===//

#ifndef GPTC_COMPILER_TRANSFORMS_PROGRAMUTILS_H
#define GPTC_COMPILER_TRANSFORMS_PROGRAMUTILS_H

#include "dialects/GPT/IR/GPTOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/IRMapping.h"

#include <string>

namespace gptc {

/// Marks a train step (@train_step, and the FP8 first step copied from it):
/// the programs that update the parameters. gpt-insert-optimizer sets it.
inline constexpr llvm::StringLiteral kTrainStepAttr = "gpt.train_step";

inline bool isTrainStep(mlir::func::FuncOp fn) { return fn->hasAttr(kTrainStepAttr); }

/// @`source` of `module`, for a pass that derives @`created` from it.
/// Emits "`pass`: no function @source" or "`pass`: @created already exists"
/// on the module and returns null when either check fails.
mlir::func::FuncOp programSource(mlir::ModuleOp module, llvm::StringRef pass,
                                 llvm::StringRef source, llvm::StringRef created);

/// `bytes` as "12.34 GiB" (MiB, KiB, or "N B" below a KiB), for messages.
std::string formatBytes(int64_t bytes);

/// True when `v` can be read just before `op`: a block argument of `op`'s
/// block or the result of an earlier op in it (a rewrite that creates an
/// op at `op` asks this of the operands it moves there).
bool availableBefore(mlir::Value v, mlir::Operation *op);

/// `v` through any gpt.reshape: the tensor whose values it views.
mlir::Value reshapeSource(mlir::Value v);

/// The uses of `v` and of the gpt.reshapes of it (transitively) that are
/// not themselves reshapes; the reshapes go into `views`, each after the
/// one it reshapes.
llvm::SmallVector<mlir::OpOperand *>
usesThroughReshapes(mlir::Value v, llvm::SmallVectorImpl<mlir::Operation *> &views);

/// A copy at `b` of the FP8 quantization `op` (gpt.fp8_quantize or
/// gpt.fp8_cast_transpose), its input and scale read through `map`, that
/// records the amax in `history` (delayed scaling), or nothing when null.
mlir::Operation *cloneFp8Quantization(mlir::OpBuilder &b, mlir::Operation *op,
                                      mlir::Value history, const mlir::IRMapping &map);

/// A gpt.fusion at `b` of `inputs`, its body's block made with one
/// argument per input; `b` is left at the start of the body.
mlir::gpt::FusionOp createFusion(mlir::OpBuilder &b, mlir::Location loc,
                                 mlir::TypeRange results, mlir::ValueRange inputs);

/// `v` converted to element type `elt` at `b` (a gpt.cast), or `v` itself.
mlir::Value castElements(mlir::OpBuilder &b, mlir::Location loc, mlir::Value v, mlir::Type elt);

} // namespace gptc

#endif // GPTC_COMPILER_TRANSFORMS_PROGRAMUTILS_H

//===- Interpreter.h - reference interpreter for the gpt dialect ---------===//
//
// Executes a statically shaped function of gpt ops on the CPU, in fp64 or
// fp32. It is the numerical ground truth that every later pass (autodiff,
// precision, fusion, remat) and the generated kernels are checked against.
// Tensors whose IR element type is bf16/f16 are rounded to that format after
// every op, so mixed-precision IR runs with its own rounding; in fp64 mode
// f32 tensors are held exactly.
//
//===----------------------------------------------------------------------===//

#ifndef GPTC_COMPILER_REFERENCE_INTERPRETER_H
#define GPTC_COMPILER_REFERENCE_INTERPRETER_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Support/LLVM.h"

#include <cstdint>
#include <string>
#include <vector>

namespace gptc::reference {

enum class Precision { F64, F32 };

/// A dense, row-major host tensor. Integer tensors hold exact integers.
struct Tensor {
  std::vector<int64_t> shape;
  std::vector<double> data;

  Tensor() = default;
  Tensor(std::vector<int64_t> shape, double fill = 0.0);
  Tensor(std::vector<int64_t> shape, std::vector<double> data);
  int64_t numElements() const { return static_cast<int64_t>(data.size()); }
};

/// Runs `fn` on `args` (one per function argument, shapes as declared).
/// A bad argument or a run-time error (a token id out of range, say) is
/// reported as a diagnostic at the function or the failing op.
mlir::FailureOr<std::vector<Tensor>> evaluate(mlir::func::FuncOp fn,
                                              llvm::ArrayRef<Tensor> args,
                                              Precision precision);

/// Rounds `x` to the nearest value of `type` (f64, f32, bf16 or f16),
/// ties to even, overflowing to infinity.
double roundTo(mlir::Type type, double x);

/// The N(0, 1) sample of gpt.random_normal: Box-Muller on two uniforms from
/// SplitMix64 of (seed, stream, index). Runtimes must compute the same.
double counterNormal(uint64_t seed, uint64_t stream, uint64_t index);

/// The `gpt.param` / `gpt.input` name of each argument of `fn` ("" if none).
std::vector<std::string> getArgumentNames(mlir::func::FuncOp fn);


} // namespace gptc::reference

#endif // GPTC_COMPILER_REFERENCE_INTERPRETER_H

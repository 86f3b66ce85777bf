//===- HostTarget.h - index-space kernels -> a host shared object --------===//

#ifndef GPTC_COMPILER_CODEGEN_HOSTTARGET_H
#define GPTC_COMPILER_CODEGEN_HOSTTARGET_H

#include "compiler/Codegen/Lowering.h"

#include <string>
#include <vector>

namespace gptc::codegen {

/// Compiles every kernel of `lowered` for this machine and links them into
/// an ELF shared object (Host ABI of executable.fbs). `dumpDir`, if set,
/// receives the kernels' MLIR and LLVM IR.
mlir::FailureOr<std::vector<uint8_t>> compileHostKernels(mlir::MLIRContext *ctx,
                                                         const Lowered &lowered,
                                                         const std::string &dumpDir);

} // namespace gptc::codegen

#endif // GPTC_COMPILER_CODEGEN_HOSTTARGET_H

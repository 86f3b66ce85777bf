//===- SharedMemory.h - pointers and asynchronous copies for CUDA kernels -===//
//
// Shared by the kernels that stage global memory in shared memory with
// cp.async: the flash attention kernels and the one-pass cross-entropy.
//
//===----------------------------------------------------------------------===//

#ifndef GPTC_COMPILER_CODEGEN_SHAREDMEMORY_H
#define GPTC_COMPILER_CODEGEN_SHAREDMEMORY_H

#include "compiler/Codegen/KernelBuilder.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"

namespace gptc::codegen {

/// &base[offset] for a pointer to `elt` elements.
inline Value elementPtr(KB &k, Value base, Type elt, Value offset) {
  offset = mlir::arith::IndexCastOp::create(k.b, k.loc, k.b.getI64Type(), offset);
  return mlir::LLVM::GEPOp::create(k.b, k.loc, base.getType(), elt, base, ValueRange{offset});
}

inline mlir::LLVM::LLVMPointerType pointerType(KB &k, mlir::NVVM::NVVMMemorySpace space) {
  return mlir::LLVM::LLVMPointerType::get(k.b.getContext(), static_cast<unsigned>(space));
}

/// The address of a kernel argument's first element, as a global pointer
/// (cp.async's source space).
inline Value globalPointer(KB &k, Value mem) {
  Value at = mlir::memref::ExtractAlignedPointerAsIndexOp::create(k.b, k.loc, mem);
  at = mlir::arith::IndexCastOp::create(k.b, k.loc, k.b.getI64Type(), at);
  Value generic = mlir::LLVM::IntToPtrOp::create(
      k.b, k.loc, mlir::LLVM::LLVMPointerType::get(k.b.getContext()), at);
  return mlir::LLVM::AddrSpaceCastOp::create(
      k.b, k.loc, pointerType(k, mlir::NVVM::NVVMMemorySpace::Global), generic);
}

/// The address of a shared buffer's first element.
inline Value sharedPointer(KB &k, Value mem) {
  Value at = mlir::memref::ExtractAlignedPointerAsIndexOp::create(k.b, k.loc, mem);
  at = mlir::arith::IndexCastOp::create(k.b, k.loc, k.b.getI64Type(), at);
  return mlir::LLVM::IntToPtrOp::create(k.b, k.loc,
                                        pointerType(k, mlir::NVVM::NVVMMemorySpace::Shared), at);
}

/// cp.async of `bytes` (4, 8 or 16) from global `src` to shared `dst`.
inline void copyAsync(KB &k, Value dst, Value src, int32_t bytes) {
  auto cache = bytes == 16 ? mlir::NVVM::LoadCacheModifierKind::CG
                           : mlir::NVVM::LoadCacheModifierKind::CA;
  mlir::NVVM::CpAsyncOp::create(k.b, k.loc, dst, src, bytes, cache, Value());
}

} // namespace gptc::codegen

#endif // GPTC_COMPILER_CODEGEN_SHAREDMEMORY_H

//===- NvvmKernel.h - pointers, cp.async and ex2 for CUDA-only kernels ---===//
//
// Shared by the kernels that are emitted for CUDA only (NVVM ops and
// intrinsics): the flash attention kernels and the one-pass cross-entropy,
// which stage global memory in shared memory with cp.async and take base-2
// exponentials on the SFU.
//
//===----------------------------------------------------------------------===//

#ifndef GPTC_COMPILER_CODEGEN_NVVMKERNEL_H
#define GPTC_COMPILER_CODEGEN_NVVMKERNEL_H

#include "compiler/Codegen/KernelBuilder.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
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

/// The block's dynamic shared memory, as bytes.
inline Value dynamicSharedMemory(KB &k) {
  auto space = mlir::gpu::AddressSpaceAttr::get(k.b.getContext(),
                                                mlir::gpu::AddressSpace::Workgroup);
  return mlir::gpu::DynamicSharedMemoryOp::create(
      k.b, k.loc,
      mlir::MemRefType::get({mlir::ShapedType::kDynamic}, k.b.getI8Type(),
                            mlir::MemRefLayoutAttrInterface{}, space));
}

/// n elements of t at byte `offset` of dynamicSharedMemory's `raw`.
inline Value sharedView(KB &k, Value raw, int64_t offset, int64_t n, Type t) {
  auto space = llvm::cast<mlir::MemRefType>(raw.getType()).getMemorySpace();
  return mlir::memref::ViewOp::create(
      k.b, k.loc, mlir::MemRefType::get({n}, t, mlir::MemRefLayoutAttrInterface{}, space), raw,
      k.idx(offset), mlir::ValueRange{});
}

/// cp.async of `bytes` (4, 8 or 16) from global `src` to shared `dst`.
inline void copyAsync(KB &k, Value dst, Value src, int32_t bytes) {
  auto cache = bytes == 16 ? mlir::NVVM::LoadCacheModifierKind::CG
                           : mlir::NVVM::LoadCacheModifierKind::CA;
  mlir::NVVM::CpAsyncOp::create(k.b, k.loc, dst, src, bytes, cache, Value());
}

/// log2 e: exp(x) = 2^(x log2 e), folded into the FMA that feeds exp2Approx.
constexpr double kLog2e = 1.4426950408889634;

/// 2^x on the SFU (ex2.approx), subnormal results flushed to zero.
inline Value exp2Approx(KB &k, Value x) {
  return mlir::LLVM::CallIntrinsicOp::create(k.b, k.loc, k.b.getF32Type(),
                                             k.b.getStringAttr("llvm.nvvm.ex2.approx.ftz.f32"),
                                             ValueRange{x})
      .getResult(0);
}

} // namespace gptc::codegen

#endif // GPTC_COMPILER_CODEGEN_NVVMKERNEL_H

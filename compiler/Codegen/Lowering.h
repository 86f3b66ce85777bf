//===- Lowering.h - planned gpt programs -> kernels, GEMMs, commands -----===//
//
// Codegen turns each planned program (@train_step, @init, @forward) into a
// list of commands over the tensors of the memory plan:
//   - gpt.matmul / gpt.linear become cuBLASLt GEMM descriptors, and
//     gpt.scaled_matmul FP8 ones with their scale tensors;
//   - views (gpt.reshape, outer gpt.slice) become nothing;
//   - gpt.all_reduce becomes an AllReduce on the communication stream,
//     after an event of the compute stream; the compute stream waits for
//     its done-event right before the first command reading its results;
//   - every other op becomes one or more index-space kernels: a body run
//     for each index in [0, threads), built with arith/math/scf/memref ops
//     on flat 1-D memrefs. The same body becomes a gpu.func (CUDA) or a
//     host loop (Host), so both targets compute the same thing.
// Kernels with the same op, types and attributes are built once.
//
//===----------------------------------------------------------------------===//

#ifndef GPTC_COMPILER_CODEGEN_LOWERING_H
#define GPTC_COMPILER_CODEGEN_LOWERING_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"

#include <functional>
#include <map>
#include <string>
#include <vector>

namespace gptc::codegen {

/// Builds a kernel body for one index: `args` are the kernel's arguments
/// (1-D memrefs, or i64/f64 scalars), `idx` an index in [0, threads).
using BodyFn = std::function<void(mlir::OpBuilder &, mlir::Location, mlir::Value idx,
                                  mlir::ValueRange args)>;

struct KernelDef {
  std::string name;
  std::vector<mlir::Type> argTypes;
  BodyFn body;
  /// CUDA: blocks that must fit on one SM at once (PTX .minnctapersm, which
  /// caps registers per thread); 0 leaves the register count to ptxas.
  int64_t minBlocksPerSM = 0;
  /// CUDA: dynamic shared memory of every launch (gpu.dynamic_shared_memory
  /// in the body); above 48 KiB the runtime raises the kernel's limit.
  int64_t sharedBytes = 0;
};

/// What a command argument refers to.
struct Operand {
  enum Kind { Tensor, Scratch, Int, Float } kind = Tensor;
  int64_t tensor = -1;   // Tensor: index into Program::tensors
  int64_t scratch = 0;   // Scratch: byte offset in the workspace
  int64_t bytes = 0;     // Scratch: size
  int64_t i64 = 0;
  double f64 = 0;
};

/// What a GEMM does to its accumulator before storing D (the schema's
/// Epilogue values that codegen emits). The bias vector is an input for
/// Bias*, the bias-gradient output for BGradB and DGeluBGrad; aux has D's
/// layout, the pre-activation written by GeluAux* and read by DGelu*.
enum class GemmEpilogue { None, Bias, GeluAux, BiasGeluAux, DGelu, BGradB, DGeluBGrad };

inline bool epilogueHasBias(GemmEpilogue e) {
  return e == GemmEpilogue::Bias || e == GemmEpilogue::BiasGeluAux || e == GemmEpilogue::BGradB ||
         e == GemmEpilogue::DGeluBGrad;
}
inline bool epilogueHasAux(GemmEpilogue e) {
  return e == GemmEpilogue::GeluAux || e == GemmEpilogue::BiasGeluAux ||
         e == GemmEpilogue::DGelu || e == GemmEpilogue::DGeluBGrad;
}

struct GemmDesc {
  int64_t m = 0, n = 0, k = 0, batch = 1;
  bool transa = false, transb = false;
  int64_t lda = 0, ldb = 0, ldc = 0, strideA = 0, strideB = 0, strideC = 0;
  GemmEpilogue epilogue = GemmEpilogue::None;
  /// Element types in cuBLASLt's terms (A is our rhs, B our lhs); the bias
  /// has C's type. Accumulation is fp32 (f64 for f64 operands).
  mlir::Type aType, bType, cType;
  /// FP8 D (gpt.scaled_matmul_gelu_fp8): D's codes, scaled by a d_scale
  /// tensor, their amax into an f32; C, bias and aux keep cType. Null: D
  /// is cType.
  mlir::Type dType;
  /// FP8: the tensor cores fold partial sums less often (faster).
  bool fastAccum = false;
  /// 1: D += the product (C is D, holding the accumulator).
  double beta = 0;
};

struct Command {
  enum Kind { Launch, Gemm, Zero, Copy, AllReduce, Record, Wait, ReduceScatter, AllGather,
              RankSlice } kind = Launch;
  unsigned kernel = 0;  // Launch
  int64_t threads = 0;  // Launch
  unsigned gemm = 0;    // Gemm
  std::vector<Operand> args; // Launch args; Gemm: a, b, c[, bias][, aux][, a_scale, b_scale (FP8)]
                             // [, d_scale, amax_d (FP8 D)];
                             // Zero/Copy/AllReduce: tensors; ReduceScatter/AllGather/
                             // RankSlice: the sources, then their destinations
  std::string op;       // the gpt op it comes from, for dumps and errors
  unsigned stream = 0;  // kCompute, or kComm for collectives
  unsigned event = 0;   // Record/Wait
  enum Reduce { Sum, Mean, Max } reduce = Sum; // AllReduce
};

/// Streams: compute, and communication (collectives overlap compute).
inline constexpr unsigned kComputeStream = 0, kCommStream = 1;

/// A tensor of the executable: an argument, a planned activation, or the
/// home of a program output.
struct TensorInfo {
  std::string name;
  std::string role;   // params, state, inputs, outputs, activations
  std::string pool;   // params, state, inputs, activations
  mlir::Type elementType;
  std::vector<int64_t> shape;
  int64_t offset = 0, bytes = 0;
  int64_t shards = 0;             // ZeRO-1: 1/shards of a tensor of fullShape
  std::vector<int64_t> fullShape;
};

struct ProgramInfo {
  std::string name;
  std::vector<int64_t> inputs, outputs; // tensor indices
  std::vector<Command> commands;
  std::string liveAtPeak; // gpt-plan-memory's describePeak of the function
};

/// Everything an executable needs, before kernels are compiled.
struct Lowered {
  std::vector<KernelDef> kernels;
  std::vector<GemmDesc> gemms;
  std::vector<TensorInfo> tensors;
  std::vector<ProgramInfo> programs;
  std::map<std::string, int64_t> poolBytes; // params, state, inputs, activations, workspace
  unsigned numEvents = 0;  // Record/Wait events of all programs
  unsigned numStreams = 1; // 2 when a program has collectives
  bool sm90a = false;      // a kernel uses wgmma: compile for sm_90a
};

/// Kernel choices that depend on the target.
struct LoweringOptions {
  /// Tensor-core flash attention (FlashAttention.h) where it applies; CUDA
  /// only. Otherwise the scalar kernels, which both targets can run.
  bool flashAttention = false;
  /// The blocked flash kernels on sm_90a's warpgroup MMA (wgmma); the
  /// kernel module must then be compiled for sm_90a (Lowered::sm90a).
  bool warpgroupMma = false;
  /// Threads per row of the row kernels (layernorm, softmax, cross-entropy
  /// statistics): 32, a warp reducing with shuffles, on CUDA; 1 on Host.
  int64_t rowLanes = 1;
  /// Vector loads and stores (several elements at once) in the column
  /// reductions and the fused AdamW; CUDA only: the Host lowering has no
  /// vector dialect conversion.
  bool vectorAccess = false;
  /// Cross-entropy as one online-softmax row launch forward that saves
  /// each row's log-sum-exp, and one backward launch that reads it
  /// (LossLowering.h). Otherwise separate statistics and gradient kernels.
  bool fusedCrossEntropy = true;
  /// With fusedCrossEntropy and vectorAccess (CUDA): the forward's launch
  /// also writes the gradient over the logits when nothing else reads
  /// them, reading each row from global memory once
  /// (buildCrossEntropyOnePass).
  bool crossEntropyOnePass = true;
  /// gpt.layernorm_grad's rows kernel also folds dweight and dbias over
  /// layerNormGradChunkRows rows per warp into partials, so the columns are
  /// not read a second time; CUDA, where a lane's columns fit in registers
  /// and the warps' sums in shared memory. Otherwise a column reduction of
  /// its own (with the same chunk, in the same order: the same bits).
  bool layerNormGradOneLaunch = true;
  /// Rows of one partial of dweight and dbias (a warp's rows when fused);
  /// 0: with layerNormGradOneLaunch about a wave of warps (4 to 64 rows),
  /// else 64 (reduceColumns').
  int64_t layerNormGradChunkRows = 0;
  /// The CUDA chip's compute capability times ten (90 for sm_90); 0 for the
  /// Host target. sm_89 and later convert to FP8 in hardware and run FP8
  /// GEMMs.
  int64_t cudaArch = 0;
  /// Threads per block of every launch (EmitOptions::blockSize).
  int64_t blockThreads = 256;
};

/// Lowers the planned functions `programs` of `module` (gpt-plan-memory
/// must have run on each). Errors are emitted at the offending op.
mlir::FailureOr<Lowered> lowerPrograms(mlir::ModuleOp module,
                                       llvm::ArrayRef<std::string> programs,
                                       const LoweringOptions &options = {});

} // namespace gptc::codegen

#endif // GPTC_COMPILER_CODEGEN_LOWERING_H

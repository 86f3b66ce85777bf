//===- Program.h - what codegen makes of a planned program --------------===//
//
// The executable's data before its kernels are compiled: kernel
// definitions (an index-space body per kernel), GEMM descriptors, the
// tensors of the memory plan, and each program's command list (launches,
// GEMMs, copies, collectives, events). lowerPrograms (Lowering.h) fills a
// Lowered; EmitExecutable.h compiles its kernels and writes it out.
//
//===----------------------------------------------------------------------===//

#ifndef GPTC_COMPILER_CODEGEN_PROGRAM_H
#define GPTC_COMPILER_CODEGEN_PROGRAM_H

#include "mlir/IR/Builders.h"

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
  /// Tensor: the SSA value the op reads or writes (null where none does),
  /// by which commands.txt names it as the last IR dump does.
  mlir::Value value;
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
  /// The op itself (`op` is its name), by which commands.txt points into
  /// the last IR dump; null where there is none.
  mlir::Operation *source = nullptr;
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

} // namespace gptc::codegen

#endif // GPTC_COMPILER_CODEGEN_PROGRAM_H

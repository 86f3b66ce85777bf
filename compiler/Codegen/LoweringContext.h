//===- LoweringContext.h - what every kernel family lowers with ---------===//
//
// The state of lowering one module's programs (formerly the private part of
// Lowering.cpp's Lowerer), below the kernel families: the result being
// built (kernels deduplicated by key, GEMMs, tensors, commands), the tensor
// table (t(v): an SSA value's tensor operand), workspace scratch, the
// options, and waits for pending collectives. Each family
// (Kernels/<Family>.cpp) defines its lowerings as LoweringContext members
// and registers them, by op class, in a LoweringRegistry; the driver
// (Lowering.cpp) walks the programs and dispatches each op to its entry.
// Families include this header, never the driver.
//
//===----------------------------------------------------------------------===//

#ifndef GPTC_COMPILER_CODEGEN_LOWERINGCONTEXT_H
#define GPTC_COMPILER_CODEGEN_LOWERINGCONTEXT_H

#include "compiler/Codegen/KernelHelpers.h"
#include "compiler/Codegen/Lowering.h"
#include "compiler/Codegen/LossLowering.h"
#include "compiler/Codegen/OptimizerLowering.h"

#include "dialects/GPT/IR/GPTOps.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/Support/raw_ostream.h"

#include <functional>
#include <map>
#include <string>
#include <vector>

namespace gptc::codegen {

using namespace mlir::gpt;

/// Rows folded by one thread in the first stage of a column reduction: the
/// (chunk, column) threads fill the GPU while each column's partials stay
/// few enough for one thread to fold in the second.
constexpr int64_t kColumnChunkRows = 64;

class LoweringContext {
public:
  LoweringContext(ModuleOp module, const LoweringOptions &options)
      : module(module), ctx(module.getContext()), options(options) {}

  Lowered result;
  ModuleOp module;
  MLIRContext *ctx;
  LoweringOptions options;
  ProgramInfo *program = nullptr;
  llvm::DenseMap<Value, int64_t> tensorOf;     // SSA value -> tensor index
  std::map<std::string, int64_t> globals;      // param/state name -> tensor
  std::map<std::string, unsigned> kernelByKey; // dedupe
  std::map<std::string, int64_t> argOffsets;   // program-local input offsets
  int64_t scratchTop = 0;                      // per command
  int64_t scratchBase = 0;                     // above what later commands read (keep)
  llvm::DenseMap<Value, Operand> savedLse;     // cross-entropy logits -> row log-sum-exp
  llvm::DenseSet<Operation *> onePassGrads;    // gradients their forward's launch wrote
  llvm::DenseMap<Value, unsigned> pending;     // all_reduce result -> done event
  llvm::DenseMap<unsigned, Operation *> eventOps; // done event -> its collective
  int kernelCounter = 0;

  int64_t addTensor(TensorInfo info) {
    result.tensors.push_back(std::move(info));
    return static_cast<int64_t>(result.tensors.size()) - 1;
  }

  Operand t(Value v) {
    Operand o{Operand::Tensor, tensorOf.lookup(v)};
    o.value = v;
    return o;
  }
  /// A kernel's tensor arguments: each value's flat type and its operand.
  void appendArgs(ValueRange values, std::vector<Type> &types, std::vector<Operand> &args) {
    for (Value v : values) {
      types.push_back(flat(v));
      args.push_back(t(v));
    }
  }
  Operand scratch(int64_t bytes) {
    Operand o{Operand::Scratch};
    o.scratch = scratchTop;
    o.bytes = bytes;
    scratchTop += (bytes + 255) / 256 * 256;
    int64_t &ws = result.poolBytes["workspace"];
    ws = std::max(ws, scratchTop);
    return o;
  }

  /// Workspace that later commands of the program read: every later
  /// command's scratch lies above it.
  Operand keep(int64_t bytes) {
    scratchTop = scratchBase;
    Operand o = scratch(bytes);
    scratchBase = scratchTop;
    return o;
  }

  /// The gradient op (gpt.cross_entropy_grad or gpt.fp8_cross_entropy_grad)
  /// that `ce`'s launch can compute as well (one pass over the logits,
  /// buildCrossEntropyOnePass): the only other reader of the logits, of
  /// the same targets, whose dloss is computed before `ce`. Writing the
  /// gradient early must overwrite nothing that is still read: a bf16
  /// gradient is planned in place of the logits; FP8 codes (half their
  /// size, never in place) need the op right after `ce`, so that no
  /// tensor read in between can share their bytes.
  Operation *onePassGrad(CrossEntropyOp ce, const CrossEntropyShape &s) {
    if (!options.crossEntropyOnePass || !options.fusedCrossEntropy || !options.vectorAccess ||
        !crossEntropyOnePassApplies(s, eltOf(ce.getLogits()), options.blockThreads))
      return nullptr;
    Operation *grad = nullptr;
    for (Operation *user : ce.getLogits().getUsers()) {
      if (user == ce)
        continue;
      if (grad || !llvm::isa<CrossEntropyGradOp, Fp8CrossEntropyGradOp>(user) ||
          user->getOperand(2) != ce.getTargets() ||
          user->getAttr("vocab_size") != ce.getVocabSize() || user->getBlock() != ce->getBlock())
        return nullptr;
      grad = user;
    }
    if (!grad)
      return nullptr;
    if (Operation *def = grad->getOperand(0).getDefiningOp();
        def && (def->getBlock() != ce->getBlock() || !def->isBeforeInBlock(ce)))
      return nullptr;
    if (llvm::isa<Fp8CrossEntropyGradOp>(grad))
      return ce->getNextNode() == grad ? grad : nullptr;
    auto offsets = grad->getAttrOfType<DenseI64ArrayAttr>("gpt.offsets");
    const TensorInfo &logits = result.tensors[tensorOf.lookup(ce.getLogits())];
    if (eltOf(grad->getResult(0)) != eltOf(ce.getLogits()) || !offsets ||
        logits.pool != "activations" || offsets[0] != logits.offset)
      return nullptr;
    return grad;
  }

  /// Adds (or reuses) the kernel `key` and launches it over `threads`.
  void launch(Operation *op, const std::string &key, const std::string &base,
              std::vector<Type> argTypes, std::vector<Operand> args, int64_t threads,
              BodyFn body, int64_t minBlocksPerSM = 0, int64_t sharedBytes = 0) {
    std::string fullKey = key;
    llvm::raw_string_ostream os(fullKey);
    for (Type ty : argTypes)
      os << "|" << ty;
    os << "|t" << threads;
    auto [it, inserted] = kernelByKey.try_emplace(fullKey, result.kernels.size());
    if (inserted)
      result.kernels.push_back({base + "_" + std::to_string(kernelCounter++),
                                std::move(argTypes), std::move(body), minBlocksPerSM,
                                sharedBytes});
    Command c;
    c.kernel = it->second;
    c.threads = threads;
    c.args = std::move(args);
    c.op = op->getName().getStringRef().str();
    c.source = op;
    program->commands.push_back(std::move(c));
  }

  std::string keyOf(Operation *op) {
    std::string s;
    llvm::raw_string_ostream os(s);
    os << op->getName();
    // The plan's offsets are launch arguments, not code: every layer's op
    // shares one kernel, and so does a rematerialized clone.
    for (NamedAttribute attr : op->getDiscardableAttrs())
      if (attr.getName() != "gpt.offsets" && attr.getName() != "gpt.remat")
        os << attr.getName() << attr.getValue();
    for (Type ty : op->getOperandTypes())
      os << ty;
    for (Type ty : op->getResultTypes())
      os << ty;
    if (op->getPropertiesStorage())
      os << op->getPropertiesAsAttribute();
    return s;
  }

  /// Per-row values of a column reduction: for columns col .. col +
  /// width - 1 of `row`, n values each, output by output (width is 1, or 2
  /// with `pairs`: col is then even and a 2-element load aligned). A
  /// callback may also queue stores of its own (an elementwise result
  /// written in the same pass): they are made after the trip's loads.
  using RowValuesFn = std::function<SmallVector<Value>(
      KB &, ValueRange ins, Value row, Value col, int64_t width, SmallVector<KB::Store> &stores)>;
  void reduceColumns(Operation *op, const std::string &key, const std::string &base,
                     std::vector<Type> inTypes, std::vector<Operand> ins,
                     std::vector<Type> outTypes, std::vector<Operand> outs, int64_t rows,
                     int64_t cols, Type ft, ReduceKind kind, RowValuesFn values,
                     bool pairs = false, int64_t chunkRows = kColumnChunkRows);
  void foldColumnPartials(Operation *op, const std::string &key, const std::string &base,
                          Operand partials, Type partialsType, std::vector<Type> outTypes,
                          std::vector<Operand> outs, int64_t parts, int64_t rows, int64_t cols,
                          Type ft, ReduceKind kind);
  /// reduceColumns of a row-major (rows, cols) matrix `in` into `out`.
  void reduceMatrix(Operation *op, const std::string &key, const std::string &base, Type inType,
                    Operand in, Type outType, Operand out, int64_t rows, int64_t cols, Type ft,
                    ReduceKind kind) {
    reduceColumns(op, key, base, {inType}, {in}, {outType}, {out}, rows, cols, ft, kind,
                  [=](KB &k, ValueRange a, Value r, Value col, int64_t width,
                      SmallVector<KB::Store> &) {
                    return k.ldConsecutive(a[0], k.add(k.mul(r, k.idx(cols)), col), width);
                  },
                  /*pairs=*/true);
  }
  void lowerGlobalNorm(GlobalNormOp gn);
  void lowerRandomNormals(ArrayRef<RandomNormalOp> ops);
  void lowerAdamWMulti(AdamWMultiOp multi);
  std::pair<Operand, int64_t> foldPartials(Operation *op, Operand values, int64_t count,
                                           const std::string &name);
  void lowerAdamWGroup(AdamWMultiOp multi, ArrayRef<size_t> which);

  LogicalResult lowerElementwise(Operation *op);
  /// Whether an elementwise kernel of u elements per thread over
  /// `tensors` takes them as consecutive chunks (ElementChunk): vector
  /// access, and every tensor aligned for its vectors.
  bool vectorChunks(ArrayRef<Value> tensors, int64_t u) {
    if (!options.vectorAccess || u == 1)
      return false;
    for (Value v : tensors) {
      const TensorInfo &info = result.tensors[tensorOf.lookup(v)];
      // Whole bytes only: a vector of i1 would load packed bits.
      int64_t bits = info.elementType.getIntOrFloatBitWidth();
      if (bits % 8)
        return false;
      int64_t bytes = std::min<int64_t>(16, u * bits / 8);
      if (info.offset % bytes)
        return false;
    }
    return true;
  }
  LogicalResult lowerFusion(FusionOp op);
  /// A row fusion: its row op `ln` after the body's elementwise values
  /// (Kernels/LayerNorm.cpp).
  LogicalResult lowerRowFusion(FusionOp fusion, LayerNormOp ln);
  /// A column-sum fusion: the body's elementwise values, stored, and the
  /// column sums of one (Kernels/Reduction.cpp).
  LogicalResult lowerColumnSumFusion(FusionOp fusion, ReduceOp sum);
  /// An attention-gradient column-sum fusion: gpt.causal_attention_grad
  /// and the column sums of its result (Kernels/Attention.cpp).
  LogicalResult lowerAttentionGradSumFusion(FusionOp fusion, CausalAttentionGradOp grad,
                                            ReduceOp sum);
  /// What the attention gradient's kernels read and write.
  struct AttentionGradValues {
    Value grad, qkv, output, lse, result;
    Attribute numHeads;
  };
  LogicalResult lowerCausalAttentionGrad(Operation *op, const std::string &key,
                                         AttentionGradValues at, Value sum);
  /// A GEMM fusion: one cuBLASLt GEMM with its epilogue
  /// (Kernels/Gemm.cpp).
  LogicalResult lowerGemmFusion(FusionOp fusion, const GemmFusion &gemm);
  /// A row-gradient fusion: its row op `ln`, each row's dx passed through
  /// the body's elementwise epilogue (Kernels/LayerNorm.cpp).
  LogicalResult lowerRowGradFusion(FusionOp fusion, LayerNormGradOp ln);
  /// What layernorm_grad's rows kernel stores of each dx element: `stores`
  /// gets dx at index `at` and the kernel's arguments, `tensors` from
  /// a[kRowGradEpilogueArg] on; `suffix` ends the kernel's name.
  struct RowGradEpilogue {
    std::string suffix;
    std::vector<Value> tensors;
    std::function<SmallVector<KB::Store>(KB &, ValueRange a, Value dx, Value at)> stores;
  };
  static constexpr size_t kRowGradEpilogueArg = 4;
  LogicalResult lowerLayerNormGrad(Operation *op, const std::string &key, Value dy, Value x,
                                   Value w, Value dw, Value db, double eps,
                                   const RowGradEpilogue &epilogue);
  /// One cuBLASLt GEMM D = op(a) op(bm) for `op`, D its first result
  /// unless `d` is given.
  LogicalResult lowerMatmul(Operation *op, Value a, Value bm, bool ta, bool tb, Value bias,
                            GemmEpilogue epilogue = GemmEpilogue::None, Value aux = Value(),
                            Value d = Value());
  LogicalResult lowerFp8Scale(Fp8ScaleOp op);
  LogicalResult lowerFp8DelayedScales(Fp8DelayedScalesOp op);
  LogicalResult lowerFp8Quantize(Fp8QuantizeOp op);
  LogicalResult lowerFp8CastTranspose(Fp8CastTransposeOp op);
  LogicalResult lowerFp8Transpose(Fp8TransposeOp op);
  /// A gpt.cross_entropy_grad or gpt.fp8_cross_entropy_grad as one rows
  /// launch (buildCrossEntropyBackwardRows): from the forward's saved
  /// log-sum-exp when it read these logits, else computing it first.
  void launchCrossEntropyBackwardRows(Operation *grad, const std::string &name);
  /// How `grad`'s kernel stores the logits' gradient (GradStore).
  GradStore gradStore(Operation *grad) const {
    return {llvm::isa<Fp8CrossEntropyGradOp>(grad), options.cudaArch >= 89};
  }
  /// With `roundedTo` the FP8 casts round each loaded element to it first
  /// (gpt.fp8_cast_transpose's rounded_to).
  void quantize(Operation *op, Value x, Value scale, Value history, Value recorded, Value result,
                Fp8Format format, bool gelu, Type roundedTo = Type());
  void castTranspose(Operation *op, Value x, Value scale, Value history, Value recorded,
                     Value rowMajor, Value transposed, Fp8Format format, bool gelu,
                     Value pre = Value(), Value sum = Value(), Type roundedTo = Type());
  LogicalResult lowerFp8CastTransposeSum(Fp8CastTransposeSumOp op);
  /// A copy of `from` into `to` (the op's result that updates it) unless the
  /// plan put them in one tensor.
  void copyUnlessInPlace(Operation *op, Value from, Value to);
  /// A recording quantization's kernel argument: `recorded` as i32 (for
  /// recordAmax), after a copy of `history` into it unless in place.
  std::pair<Type, Operand> recordedArg(Operation *op, Value history, Value recorded);
  /// The compute stream waits for the collectives whose results `operands`
  /// read, or for all not yet waited for (LoweringContext.cpp; the driver,
  /// Lowering.cpp, records their events).
  void waitForAll();
  void waitFor(ValueRange operands);
  /// Places `op`'s results in the tensor table (gpt.offsets: views in
  /// their source's bytes, others a tensor each; LoweringContext.cpp).
  LogicalResult mapResults(Operation *op);

  // One lowering per op class (the registry's entries), in the family's file.
  // Kernels/Elementwise.cpp
  LogicalResult lowerReshapeOp(Operation *op);
  LogicalResult lowerSliceOp(Operation *op);
  LogicalResult lowerFusionOp(Operation *op);
  // Kernels/Gemm.cpp
  LogicalResult lowerLinearOp(Operation *op);
  LogicalResult lowerMatmulOp(Operation *op);
  LogicalResult lowerScaledMatmulOp(Operation *op);
  LogicalResult lowerScaledMatmulGeluFp8Op(Operation *op);
  // Kernels/Fp8.cpp
  LogicalResult lowerFp8ScaleOp(Operation *op);
  LogicalResult lowerFp8DelayedScalesOp(Operation *op);
  LogicalResult lowerFp8QuantizeOp(Operation *op);
  LogicalResult lowerFp8CastTransposeOp(Operation *op);
  LogicalResult lowerFp8CastTransposeSumOp(Operation *op);
  LogicalResult lowerFp8TransposeOp(Operation *op);
  // Kernels/Embedding.cpp
  LogicalResult lowerEmbedOp(Operation *op);
  LogicalResult lowerEmbedGradOp(Operation *op);
  // Kernels/LayerNorm.cpp
  LogicalResult lowerLayerNormOp(Operation *op);
  LogicalResult lowerAddLayerNormFp8Op(Operation *op);
  LogicalResult lowerLayerNormGradOp(Operation *op);
  // Kernels/Attention.cpp
  LogicalResult lowerCausalAttentionOp(Operation *op);
  LogicalResult lowerCausalAttentionGradOp(Operation *op);
  // Kernels/CrossEntropy.cpp
  LogicalResult lowerCrossEntropyOp(Operation *op);
  LogicalResult lowerFp8CrossEntropyGradOp(Operation *op);
  LogicalResult lowerCrossEntropyGradOp(Operation *op);
  // Kernels/AdamW.cpp
  LogicalResult lowerAdamWMultiOp(Operation *op);
  LogicalResult lowerLRScheduleOp(Operation *op);
  LogicalResult lowerAdamWOp(Operation *op);
  // Kernels/Reduction.cpp
  LogicalResult lowerReduceOp(Operation *op);
  LogicalResult lowerGlobalNormOp(Operation *op);
};

/// A lowering of one op: its commands appended to the context's program.
using LoweringFn = std::function<LogicalResult(LoweringContext &, Operation *)>;

/// Op class -> its lowering, filled by the families' register functions
/// (as Triton's populate<Family>Patterns). An op without an entry is
/// lowered as an elementwise op (LoweringContext::lowerElementwise).
class LoweringRegistry {
public:
  template <typename... Ops>
  void add(const LoweringFn &fn) {
    (add(TypeID::get<Ops>(), fn), ...);
  }
  /// A family's LoweringContext member as the lowering of `Ops`.
  template <typename... Ops>
  void add(LogicalResult (LoweringContext::*member)(Operation *)) {
    add<Ops...>([member](LoweringContext &cx, Operation *op) { return (cx.*member)(op); });
  }
  void add(TypeID op, const LoweringFn &fn);
  /// The entry of `op`'s class, or null.
  const LoweringFn *lookup(Operation *op) const;

private:
  llvm::DenseMap<TypeID, LoweringFn> entries;
};

// One register function per kernel family (Kernels/<Family>.cpp).
void registerElementwiseLowerings(LoweringRegistry &registry);
void registerGemmLowerings(LoweringRegistry &registry);
void registerFp8Lowerings(LoweringRegistry &registry);
void registerEmbeddingLowerings(LoweringRegistry &registry);
void registerLayerNormLowerings(LoweringRegistry &registry);
void registerAttentionLowerings(LoweringRegistry &registry);
void registerCrossEntropyLowerings(LoweringRegistry &registry);
void registerReductionLowerings(LoweringRegistry &registry);
void registerAdamWLowerings(LoweringRegistry &registry);
void registerRandomLowerings(LoweringRegistry &registry);

} // namespace gptc::codegen

#endif // GPTC_COMPILER_CODEGEN_LOWERINGCONTEXT_H

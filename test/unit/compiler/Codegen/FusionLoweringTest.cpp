//===- FusionLoweringTest.cpp - launches of the fused optimizer and loss -===//
//
// Lowers the `tiny` train step (CUDA row lanes: a warp per row) with and
// without gpt-fuse-adamw and the fused cross-entropy, and counts the kernel
// launches of each op: one for all AdamW updates (one per gradient element
// type in bf16), and one row launch per direction of the cross-entropy
// (plus the forward's mean), whose gradient overwrites the logits, or with
// vector access one launch for both (the one-pass kernel). Also
// builds kernel bodies to check that a warp keeps a layernorm row that fits
// in registers (each element loaded once, no loop; once per row of its
// chunk when the layernorm gradient's rows kernel also sums the columns),
// that the layernorm gradient is a rows kernel and a fold with one launch
// and a rows, a column and a fold kernel without, and that elementwise
// kernels use vector loads and stores where the target has them, and that
// the batched kernels (gradient norm, @init's draws) hold one loop per
// element type rather than one per tensor.
//
//===----------------------------------------------------------------------===//

#include "TestUtils.h"

#include "compiler/Codegen/Lowering.h"
#include "dialects/GPT/IR/GPTOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

using namespace gptc;
using namespace gptc::testing;

namespace {

class FusionLoweringTest : public GPT2Test {
protected:
  /// Launches of @train_step per gpt op (a fusion of a kind by the kind's
  /// name: gpt.causal_attention_grad_sum), and the kernel names of each.
  std::map<std::string, int> launches;
  std::map<std::string, std::vector<std::string>> kernels;
  std::vector<codegen::Command> ceGrad, ce;
  bool onePass = true; // LoweringOptions::crossEntropyOnePass
  bool lnOneLaunch = true;  // LoweringOptions::layerNormGradOneLaunch
  int64_t lnChunkRows = 0;  // LoweringOptions::layerNormGradChunkRows
  bool flash = false;   // LoweringOptions::flashAttention
  bool fp8LmHead = false, fp8CrossEntropyGrad = true, fp8SteadyStep = true; // CompileOptions
  std::vector<codegen::Command> attentionGrad;

  std::optional<codegen::Lowered> lowered;

  void lower(bool fuseAdamW, bool fuseCrossEntropy, const std::string &precision = "fp32",
             bool narrowGrads = true, const std::string &preset = "tiny", int64_t lanes = 32,
             bool vectorAccess = false) {
    ASSERT_TRUE(compile(preset, Phase::MemoryPlan, [&](CompileOptions &o) {
      o.fuseAdamW = fuseAdamW;
      o.narrowGrads = narrowGrads;
      o.precision = *parsePrecision(precision);
      o.fp8LmHead = fp8LmHead;
      if (!fp8CrossEntropyGrad)
        o.disablePatterns = "fp8-cross-entropy-grad";
      o.fp8SteadyStep = fp8SteadyStep;
    }));
    codegen::LoweringOptions options;
    options.rowLanes = lanes;
    options.fusedCrossEntropy = fuseCrossEntropy;
    options.vectorAccess = vectorAccess;
    options.crossEntropyOnePass = onePass;
    options.layerNormGradOneLaunch = lnOneLaunch;
    options.layerNormGradChunkRows = lnChunkRows;
    options.flashAttention = flash;
    auto result = codegen::lowerPrograms(*module, {"train_step"}, options);
    ASSERT_TRUE(mlir::succeeded(result)) << diagnostics;
    lowered = std::move(*result);
    for (const codegen::Command &c : lowered->programs.front().commands) {
      if (c.kind != codegen::Command::Launch)
        continue;
      std::string op = c.source ? "gpt." + mlir::gpt::opKindName(c.source) : c.op;
      ++launches[op];
      kernels[op].push_back(lowered->kernels[c.kernel].name);
      if (op == "gpt.cross_entropy_grad")
        ceGrad.push_back(c);
      if (op == "gpt.cross_entropy" || op == "gpt.fp8_cross_entropy_grad")
        ce.push_back(c);
      if (op == "gpt.causal_attention_grad_sum")
        attentionGrad.push_back(c);
    }
  }
};

// tiny: wte, wpe, 2 x 12 per block, ln_f weight and bias.
constexpr int kParams = 2 + 2 * 12 + 2;

TEST_F(FusionLoweringTest, FusedAdamWIsOneLaunch) {
  ASSERT_NO_FATAL_FAILURE(lower(true, true));
  EXPECT_EQ(launches["gpt.adamw_multi"], 1);
  EXPECT_EQ(launches.count("gpt.adamw"), 0u);
}

// bf16: the weight gradients are bf16 (narrow-grads), the embedding and
// layernorm ones f32: a launch for each.
TEST_F(FusionLoweringTest, FusedAdamWIsOneLaunchPerGradientType) {
  ASSERT_NO_FATAL_FAILURE(lower(true, true, "bf16"));
  EXPECT_EQ(launches["gpt.adamw_multi"], 2);
  launches.clear();
  ASSERT_NO_FATAL_FAILURE(lower(true, true, "bf16", /*narrowGrads=*/false));
  EXPECT_EQ(launches["gpt.adamw_multi"], 1);
}

TEST_F(FusionLoweringTest, UnfusedAdamWIsOneLaunchPerParameter) {
  ASSERT_NO_FATAL_FAILURE(lower(false, true));
  EXPECT_EQ(launches["gpt.adamw"], kParams);
  EXPECT_EQ(launches.count("gpt.adamw_multi"), 0u);
}

TEST_F(FusionLoweringTest, FusedCrossEntropyIsOneRowLaunchPerDirection) {
  for (const char *precision : {"fp32", "bf16"}) {
    launches.clear();
    kernels.clear();
    ceGrad.clear();
    ASSERT_NO_FATAL_FAILURE(lower(true, true, precision));
    // Forward: the online row kernel and the mean; backward: one launch
    // that reads the saved log-sum-exp (its fifth argument).
    ASSERT_EQ(launches["gpt.cross_entropy"], 2) << precision;
    EXPECT_EQ(kernels["gpt.cross_entropy"][0].rfind("crossentropy_forward_online", 0), 0u);
    ASSERT_EQ(launches["gpt.cross_entropy_grad"], 1) << precision;
    EXPECT_EQ(kernels["gpt.cross_entropy_grad"][0].rfind("crossentropy_backward_fused", 0), 0u);
    ASSERT_EQ(ceGrad.size(), 1u);
    EXPECT_EQ(ceGrad[0].args.size(), 5u) << "no saved log-sum-exp operand";
    // The gradient overwrites the logits (arguments 1 and 3).
    const auto &tensors = lowered->tensors;
    EXPECT_EQ(tensors[ceGrad[0].args[1].tensor].offset, tensors[ceGrad[0].args[3].tensor].offset)
        << precision;
  }
}

TEST_F(FusionLoweringTest, UnfusedCrossEntropyHasSeparateStatistics) {
  ASSERT_NO_FATAL_FAILURE(lower(true, false));
  EXPECT_EQ(launches["gpt.cross_entropy"], 2);
  EXPECT_EQ(launches["gpt.cross_entropy_grad"], 2);
}

/// Builds the body of the first kernel named `prefix...` into a function
/// and walks it: visit(op, entry block). False when there is no such kernel.
bool walkKernel(mlir::MLIRContext &context, const codegen::Lowered &lowered,
                const std::string &prefix,
                llvm::function_ref<void(mlir::Operation *, mlir::Block *)> visit) {
  context.loadDialect<mlir::arith::ArithDialect, mlir::gpu::GPUDialect, mlir::math::MathDialect,
                      mlir::memref::MemRefDialect, mlir::scf::SCFDialect,
                      mlir::vector::VectorDialect, mlir::func::FuncDialect,
                      mlir::LLVM::LLVMDialect, mlir::NVVM::NVVMDialect>();
  for (const codegen::KernelDef &k : lowered.kernels) {
    if (k.name.rfind(prefix, 0) != 0)
      continue;
    mlir::OpBuilder b(&context);
    mlir::Location loc = b.getUnknownLoc();
    auto owner = mlir::ModuleOp::create(loc);
    b.setInsertionPointToEnd(owner.getBody());
    std::vector<mlir::Type> types(k.argTypes);
    types.push_back(b.getIndexType());
    auto fn = mlir::func::FuncOp::create(b, loc, "body", b.getFunctionType(types, {}));
    mlir::Block *entry = fn.addEntryBlock();
    b.setInsertionPointToStart(entry);
    k.body(b, loc, entry->getArguments().back(), entry->getArguments().drop_back());
    mlir::func::ReturnOp::create(b, loc);
    fn.walk([&](mlir::Operation *op) { visit(op, entry); });
    owner->erase();
    return true;
  }
  ADD_FAILURE() << "no kernel " << prefix;
  return false;
}

/// The first kernel named `prefix...`: its scf.for loops and its loads of
/// argument `arg`.
std::pair<int, int> loopsAndLoads(mlir::MLIRContext &context, const codegen::Lowered &lowered,
                                  const std::string &prefix, unsigned arg) {
  int loops = 0, loads = 0;
  if (!walkKernel(context, lowered, prefix, [&](mlir::Operation *op, mlir::Block *entry) {
        loops += llvm::isa<mlir::scf::ForOp>(op);
        if (auto load = llvm::dyn_cast<mlir::memref::LoadOp>(op))
          loads += load.getMemRef() == entry->getArgument(arg);
      }))
    return {-1, -1};
  return {loops, loads};
}

// bf16 with vector access (CUDA): the logits' gradient, planned over the
// logits, is written by the forward's launch, one 256-thread block per row
// with the row staged in shared memory; the backward launches nothing. The
// kernel reads the logits from global memory only through its cp.async
// copies, once.
TEST_F(FusionLoweringTest, CrossEntropyGradientInTheForwardsOnePass) {
  ASSERT_NO_FATAL_FAILURE(lower(true, true, "bf16", true, "tiny", 32, /*vectorAccess=*/true));
  EXPECT_EQ(launches.count("gpt.cross_entropy_grad"), 0u);
  ASSERT_FALSE(ce.empty());
  const codegen::Command &c = ce.front();
  const codegen::KernelDef &kernel = lowered->kernels[c.kernel];
  EXPECT_EQ(kernel.name.rfind("crossentropy_forward_backward", 0), 0u);
  // Arguments: logits, targets, dloss, losses, gradient (the logits); the
  // memory plan put the gradient at the logits' offset.
  ASSERT_EQ(c.args.size(), 5u);
  EXPECT_EQ(c.args[4].tensor, c.args[0].tensor);
  const codegen::TensorInfo &logits = lowered->tensors[c.args[0].tensor];
  int grads = 0;
  auto step = module->lookupSymbol<mlir::func::FuncOp>("train_step");
  step.walk([&](mlir::gpt::CrossEntropyGradOp g) {
    ++grads;
    auto offsets = g->getAttrOfType<mlir::DenseI64ArrayAttr>("gpt.offsets");
    ASSERT_TRUE(offsets);
    EXPECT_EQ(offsets[0], logits.offset);
  });
  EXPECT_EQ(grads, 1);
  int64_t rows = lowered->tensors[c.args[1].tensor].bytes / 4;
  EXPECT_EQ(c.threads, rows * 256);
  EXPECT_EQ(kernel.sharedBytes, logits.shape.back() * 2 + 8 * 2 * 4);
  EXPECT_EQ(kernel.minBlocksPerSM, 2);
  // The logits (argument 0) are used only for their address, the copies'
  // source; the kernel's loads read shared memory.
  int copies = 0, addressUses = 0, otherUses = 0;
  ASSERT_TRUE(walkKernel(context, *lowered, "crossentropy_forward_backward",
                         [&](mlir::Operation *op, mlir::Block *entry) {
    copies += llvm::isa<mlir::NVVM::CpAsyncOp>(op);
    for (mlir::Value operand : op->getOperands())
      if (operand == entry->getArgument(0))
        ++(llvm::isa<mlir::memref::ExtractAlignedPointerAsIndexOp>(op) ? addressUses
                                                                      : otherUses);
  }));
  EXPECT_GT(copies, 0);
  EXPECT_GT(addressUses, 0);
  EXPECT_EQ(otherUses, 0);
}

// The one pass needs 16-bit logits (a row in shared memory), vector access
// and its option; otherwise a forward and a backward launch, as before.
TEST_F(FusionLoweringTest, CrossEntropyOnePassNeedsNarrowLogitsAndItsOption) {
  ASSERT_NO_FATAL_FAILURE(lower(true, true, "fp32", true, "tiny", 32, /*vectorAccess=*/true));
  EXPECT_EQ(launches["gpt.cross_entropy_grad"], 1);
  launches.clear();
  onePass = false;
  ASSERT_NO_FATAL_FAILURE(lower(true, true, "bf16", true, "tiny", 32, /*vectorAccess=*/true));
  EXPECT_EQ(launches["gpt.cross_entropy_grad"], 1);
  launches.clear();
  onePass = true;
  ASSERT_NO_FATAL_FAILURE(lower(true, true, "bf16", true, "tiny", 32, /*vectorAccess=*/false));
  EXPECT_EQ(launches["gpt.cross_entropy_grad"], 1);
}

// fp8 with the FP8 LM head (CUDA): the forward's one-pass launch writes
// the logits' gradient as e5m2 codes into their own tensor (not over the
// logits) and the inverse scale, a byte transpose gives the other layout,
// and the gradient's scale and cast-transpose are gone; without the one
// pass, the rows kernel writes the codes.
TEST_F(FusionLoweringTest, Fp8LogitGradientIsWrittenByTheLossKernel) {
  fp8LmHead = true;
  fp8SteadyStep = false; // one train step, whose scales are launches of their own
  fp8CrossEntropyGrad = false;
  ASSERT_NO_FATAL_FAILURE(lower(true, true, "fp8", true, "tiny", 32, /*vectorAccess=*/true));
  std::map<std::string, int> castFirst = launches;
  launches.clear();
  ce.clear();
  fp8CrossEntropyGrad = true;
  ASSERT_NO_FATAL_FAILURE(lower(true, true, "fp8", true, "tiny", 32, /*vectorAccess=*/true));
  EXPECT_EQ(launches.count("gpt.cross_entropy_grad"), 0u);
  EXPECT_EQ(launches.count("gpt.fp8_cross_entropy_grad"), 0u);
  EXPECT_EQ(launches["gpt.fp8_transpose"], 1);
  EXPECT_EQ(launches["gpt.fp8_cast_transpose"], castFirst["gpt.fp8_cast_transpose"] - 1);
  EXPECT_EQ(launches["gpt.fp8_scale"], castFirst["gpt.fp8_scale"] - 1);
  ASSERT_FALSE(ce.empty());
  const codegen::Command &c = ce.front();
  EXPECT_EQ(lowered->kernels[c.kernel].name.rfind("crossentropy_forward_backward", 0), 0u);
  // logits, targets, dloss, losses, codes, inverse.
  ASSERT_EQ(c.args.size(), 6u);
  const codegen::TensorInfo &codes = lowered->tensors[c.args[4].tensor];
  EXPECT_TRUE(llvm::isa<mlir::Float8E5M2Type>(codes.elementType));
  EXPECT_NE(c.args[4].tensor, c.args[0].tensor);
  EXPECT_EQ(codes.bytes * 2, lowered->tensors[c.args[0].tensor].bytes);
  EXPECT_EQ(lowered->tensors[c.args[5].tensor].bytes, 4);

  launches.clear();
  ce.clear();
  onePass = false;
  ASSERT_NO_FATAL_FAILURE(lower(true, true, "fp8", true, "tiny", 32, /*vectorAccess=*/true));
  ASSERT_EQ(launches["gpt.fp8_cross_entropy_grad"], 1);
  EXPECT_EQ(kernels["gpt.fp8_cross_entropy_grad"][0].rfind("crossentropy_backward_fp8", 0), 0u);
}

// bf16 mini (T = 64, head dimension 16: the flash kernels): the qkv bias
// gradient comes with the attention gradient. Both backward kernels take a
// seventh argument, the (B T / 16, 3C) f32 tile sums, which one column
// reduction folds into the bias gradient; dqkv is never read back.
TEST_F(FusionLoweringTest, AttentionGradSumFoldsTheFlashKernelsTileSums) {
  flash = true;
  ASSERT_NO_FATAL_FAILURE(lower(true, true, "bf16", true, "mini", 32, /*vectorAccess=*/true));
  EXPECT_EQ(launches.count("gpt.causal_attention_grad"), 0u);
  ASSERT_EQ(launches["gpt.causal_attention_grad_sum"], 2 * 4) << "2 layers";
  const std::vector<std::string> &names = kernels["gpt.causal_attention_grad_sum"];
  for (size_t layer = 0; layer < 2; ++layer) {
    const codegen::Command *q = &attentionGrad[4 * layer], *kv = q + 1, *fold = q + 2;
    EXPECT_EQ(names[4 * layer].rfind("flash_attention_backward_q", 0), 0u);
    EXPECT_EQ(names[4 * layer + 1].rfind("flash_attention_backward_kv", 0), 0u);
    EXPECT_EQ(names[4 * layer + 2].rfind("attention_backward_sum", 0), 0u);
    EXPECT_EQ(names[4 * layer + 3].rfind("attention_backward_sum_sum", 0), 0u);
    ASSERT_EQ(q->args.size(), 7u);
    ASSERT_EQ(kv->args.size(), 7u);
    const codegen::Operand &sums = q->args[6];
    ASSERT_EQ(sums.kind, codegen::Operand::Scratch);
    EXPECT_EQ(sums.bytes, 4 * 64 / 16 * 3 * 64 * 4) << "B T / 16 rows of 3C floats";
    EXPECT_EQ(kv->args[6].scratch, sums.scratch);
    ASSERT_FALSE(fold->args.empty());
    EXPECT_EQ(fold->args[0].kind, codegen::Operand::Scratch);
    EXPECT_EQ(fold->args[0].scratch, sums.scratch);
  }
}

// Without the flash kernels (fp32) the fusion's sum is a column
// reduction of dqkv as stored, after the scalar kernels.
TEST_F(FusionLoweringTest, AttentionGradSumOnTheScalarKernelsReadsDqkv) {
  ASSERT_NO_FATAL_FAILURE(lower(true, true, "fp32", true, "mini", 32, /*vectorAccess=*/true));
  ASSERT_EQ(launches["gpt.causal_attention_grad_sum"], 2 * 5) << "2 layers";
  const codegen::Command &v = attentionGrad[2], &fold = attentionGrad[3];
  EXPECT_EQ(kernels["gpt.causal_attention_grad_sum"][2].rfind("attention_backward_v", 0), 0u);
  ASSERT_EQ(fold.args.size(), 2u);
  EXPECT_EQ(fold.args[0].kind, codegen::Operand::Tensor);
  EXPECT_EQ(fold.args[0].tensor, v.args[3].tensor) << "the column reduction reads dqkv";
}

// mini: C = 64, 2 columns per lane of a warp. The forward reads its sum
// operands (arguments 0 and 1) once per element and never the sum it
// stores, the backward dy and x (arguments 0 and 1) once per element, all
// without a loop; with one lane per row (the Host target) the
// passes loop over the row.
TEST_F(FusionLoweringTest, WarpRowKernelsReadEachRowOnce) {
  ASSERT_NO_FATAL_FAILURE(lower(true, true, "bf16", true, "mini", 32));
  EXPECT_EQ(loopsAndLoads(context, *lowered, "add_layernorm_forward", 0),
            std::make_pair(0, 2));
  // The stored sum (argument 4) is never read back.
  EXPECT_EQ(loopsAndLoads(context, *lowered, "add_layernorm_forward", 4),
            std::make_pair(0, 0));
  // The one-launch gradient: once per row of the warp's chunk (one loop).
  EXPECT_EQ(loopsAndLoads(context, *lowered, "layernorm_backward_rows_add_cols", 1),
            std::make_pair(1, 2));
  EXPECT_EQ(loopsAndLoads(context, *lowered, "layernorm_backward_rows_add_cols", 0),
            std::make_pair(1, 2));
  lnOneLaunch = false;
  ASSERT_NO_FATAL_FAILURE(lower(true, true, "bf16", true, "mini", 32));
  EXPECT_EQ(loopsAndLoads(context, *lowered, "layernorm_backward_rows_add", 1),
            std::make_pair(0, 2));
  EXPECT_EQ(loopsAndLoads(context, *lowered, "layernorm_backward_rows_add", 0),
            std::make_pair(0, 2));
  ASSERT_NO_FATAL_FAILURE(lower(true, true, "bf16", true, "mini", 1));
  auto [loops, loads] = loopsAndLoads(context, *lowered, "layernorm_backward_rows_add", 1);
  EXPECT_GT(loops, 0);
  EXPECT_GT(loads, 1);
}

bool startsWith(const std::string &s, const std::string &prefix) {
  return s.rfind(prefix, 0) == 0;
}

/// The kernel names and threads of the layernorm gradients' launches
/// (gpt.layernorm_grad, or a row-gradient gpt.fusion).
std::vector<std::pair<std::string, int64_t>> layerNormGradLaunches(const codegen::Lowered &l) {
  std::vector<std::pair<std::string, int64_t>> out;
  for (const codegen::Command &c : l.programs.front().commands)
    if (c.kind == codegen::Command::Launch &&
        startsWith(l.kernels[c.kernel].name, "layernorm_backward"))
      out.push_back({l.kernels[c.kernel].name, c.threads});
  return out;
}

// mini (C = 64, 256 rows): with a warp per row, each layernorm gradient is
// a rows kernel that also folds dweight and dbias into partials (4 rows per
// warp for so small an input: 64 warps), then the partials' fold; its warps'
// sums take 2 x 64 floats of shared memory each.
TEST_F(FusionLoweringTest, LayerNormGradFoldsColumnsInItsRowsKernel) {
  ASSERT_NO_FATAL_FAILURE(lower(true, true, "bf16", true, "mini", 32));
  auto ln = layerNormGradLaunches(*lowered);
  ASSERT_EQ(ln.size(), 2u * 5); // 2 per block layernorm and the final one
  for (size_t i = 0; i < ln.size(); i += 2) {
    EXPECT_TRUE(startsWith(ln[i].first, "layernorm_backward_rows")) << ln[i].first;
    EXPECT_NE(ln[i].first.find("_cols_"), std::string::npos) << ln[i].first;
    EXPECT_EQ(ln[i].second, 256 / 4 * 32);
    EXPECT_TRUE(startsWith(ln[i + 1].first, "layernorm_backward_cols_sum")) << ln[i + 1].first;
    EXPECT_EQ(ln[i + 1].second, 64 * 32); // a warp per column
  }
  for (const codegen::KernelDef &k : lowered->kernels)
    if (startsWith(k.name, "layernorm_backward_rows"))
      EXPECT_EQ(k.sharedBytes, 8 * 2 * 64 * 4) << k.name;
  // The chunk is a flag's: 8 rows, 32 warps.
  lnChunkRows = 8;
  ASSERT_NO_FATAL_FAILURE(lower(true, true, "bf16", true, "mini", 32));
  ln = layerNormGradLaunches(*lowered);
  ASSERT_EQ(ln.size(), 2u * 5);
  EXPECT_EQ(ln[0].second, 256 / 8 * 32);
}

// tiny (C = 16): a warp's lanes cannot each keep whole columns of a row,
// so even with one launch asked for, the column sums are a kernel of their
// own (3 launches per layernorm gradient).
TEST_F(FusionLoweringTest, LayerNormGradNeedsResidentColumnsForOneLaunch) {
  ASSERT_NO_FATAL_FAILURE(lower(true, true, "bf16", true, "tiny", 32));
  auto ln = layerNormGradLaunches(*lowered);
  ASSERT_EQ(ln.size(), 3u * 5);
  for (size_t i = 0; i < ln.size(); i += 3)
    EXPECT_EQ(ln[i].first.find("_cols_"), std::string::npos) << ln[i].first;
}

// Without one launch, or with a lane per row (Host), the column sums are a
// reduceColumns of their own: rows, partials, fold.
TEST_F(FusionLoweringTest, LayerNormGradColumnKernelWithoutOneLaunch) {
  for (int64_t lanes : {32, 1}) {
    lnOneLaunch = lanes == 1;
    ASSERT_NO_FATAL_FAILURE(lower(true, true, "bf16", true, "mini", lanes));
    auto ln = layerNormGradLaunches(*lowered);
    ASSERT_EQ(ln.size(), 3u * 5) << lanes;
    for (size_t i = 0; i < ln.size(); i += 3) {
      EXPECT_TRUE(startsWith(ln[i].first, "layernorm_backward_rows")) << ln[i].first;
      EXPECT_EQ(ln[i].first.find("_cols_"), std::string::npos) << ln[i].first;
      EXPECT_EQ(ln[i].second, 256 * lanes);
      EXPECT_TRUE(startsWith(ln[i + 1].first, "layernorm_backward_cols_")) << ln[i + 1].first;
      EXPECT_EQ(ln[i + 1].second, 256 / 64 * 64); // 64-row chunks x columns
      EXPECT_TRUE(startsWith(ln[i + 2].first, "layernorm_backward_cols_sum")) << ln[i + 2].first;
    }
  }
}

/// Vector and scalar memory accesses of the first kernel named `prefix...`.
struct Accesses {
  int vectorLoads = 0, vectorStores = 0, scalarLoads = 0, scalarStores = 0;
};
Accesses accessesOf(mlir::MLIRContext &context, const codegen::Lowered &lowered,
                    const std::string &prefix) {
  Accesses n;
  walkKernel(context, lowered, prefix, [&](mlir::Operation *op, mlir::Block *) {
    n.vectorLoads += llvm::isa<mlir::vector::LoadOp>(op);
    n.vectorStores += llvm::isa<mlir::vector::StoreOp>(op);
    n.scalarLoads += llvm::isa<mlir::memref::LoadOp>(op);
    n.scalarStores += llvm::isa<mlir::memref::StoreOp>(op);
  });
  return n;
}

// mini bf16: the first fusion, which casts the f32 weights to bf16 at the
// step's start. With vector access (CUDA) a thread reads 8 consecutive elements of
// each weight as 16-byte vectors and writes them as one: no scalar access.
// Without (Host), one element per thread, scalar loads and stores.
TEST_F(FusionLoweringTest, ElementwiseKernelsUseVectorsWithVectorAccess) {
  ASSERT_NO_FATAL_FAILURE(lower(true, true, "bf16", true, "mini", 32, /*vectorAccess=*/true));
  Accesses v = accessesOf(context, *lowered, "fusion");
  EXPECT_GT(v.vectorLoads, 0);
  EXPECT_GT(v.vectorStores, 0);
  EXPECT_EQ(v.scalarLoads, 0);
  EXPECT_EQ(v.scalarStores, 0);
  ASSERT_NO_FATAL_FAILURE(lower(true, true, "bf16", true, "mini", 1, /*vectorAccess=*/false));
  Accesses s = accessesOf(context, *lowered, "fusion");
  EXPECT_EQ(s.vectorLoads + s.vectorStores, 0);
  EXPECT_GT(s.scalarLoads, 0);
  EXPECT_GT(s.scalarStores, 0);
}

// The gradient norm's batched first stage: one loop per (element type,
// vector width) of its inputs, reached through a switch on the input, not
// one per input (a kernel of 128 inputs was ~22K lines of PTX).
TEST_F(FusionLoweringTest, SumOfSquaresHasALoopPerInputClass) {
  ASSERT_NO_FATAL_FAILURE(lower(true, true, "bf16", true, "mini", 32, /*vectorAccess=*/true));
  int inputs = 0;
  module->walk([&](mlir::gpt::GlobalNormOp n) { inputs += n.getInputs().size(); });
  int loops = 0, switches = 0;
  ASSERT_TRUE(walkKernel(context, *lowered, "sum_of_squares", [&](mlir::Operation *op, mlir::Block *) {
    loops += llvm::isa<mlir::scf::ForOp>(op);
    switches += llvm::isa<mlir::scf::IndexSwitchOp>(op);
  }));
  EXPECT_GT(inputs, 8);
  EXPECT_GE(loops, 1);
  EXPECT_LE(loops, 4); // bf16 and f32, each vectorized or not
  EXPECT_EQ(switches, 2);
}

// @init draws every parameter in one batched launch: the kernel's code does
// not depend on the parameter's stream or scale.
TEST_F(FusionLoweringTest, InitDrawsEveryParameterInOneLaunch) {
  ASSERT_TRUE(compile("tiny", Phase::MemoryPlan));
  auto result = codegen::lowerPrograms(*module, {"init"}, codegen::LoweringOptions());
  ASSERT_TRUE(mlir::succeeded(result)) << diagnostics;
  int draws = 0, launches = 0;
  module->walk([&](mlir::gpt::RandomNormalOp) { ++draws; });
  for (const codegen::Command &c : result->programs.front().commands)
    launches += c.kind == codegen::Command::Launch && c.op == "gpt.random_normal";
  EXPECT_GT(draws, 1);
  EXPECT_EQ(launches, 1);
}

} // namespace

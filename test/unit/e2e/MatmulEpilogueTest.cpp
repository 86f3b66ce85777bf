//===- MatmulEpilogueTest.cpp - GEMM epilogue fusion trains like unfused --===//
//
// gpt-fuse-matmul-epilogue moves the MLP's GELU and GELU gradient and every
// bias gradient into GEMM epilogues. The `tiny` preset, compiled for the
// Host target (whose GEMM implements the epilogues as executable.fbs
// defines them) with and without the pass (all four folds, bias-grad
// included), in fp32 and bf16:
//   - the fused step has one GELU and one GELU-gradient-and-sum GEMM
//     fusion per layer, a bias-gradient GEMM fusion per other linear layer,
//     and no gelu left outside them;
//   - the fp64 interpreter gives both IRs the same loss (fp32: exactly the
//     same maths; bf16: GELU reads the unrounded pre-activation);
//   - the Host runs agree on every loss and on the parameters to a stated
//     tolerance (relativeL2: the key bias is noise), and track the
//     interpreter.
//
//===----------------------------------------------------------------------===//

#include "e2e/HostTraining.h"

#include "dialects/GPT/IR/GPTOps.h"

#include <cmath>

using namespace gptc;
using namespace gptc::testing;

namespace {

constexpr int64_t kBatch = 2, kSeq = 8, kSteps = 5, kVocab = 60;

struct StepRun {
  int64_t linearGelu = 0, geluGrad = 0, geluBiasGrad = 0, biasGrad = 0, gelu = 0;
  std::vector<float> losses;
  std::vector<std::vector<float>> params; // as f32, in tensor order
  std::vector<std::string> names;
  double referenceLoss = 0; // fp64 interpreter, first step
};

class MatmulEpilogueTest : public HostTrainingTest {
protected:
  void train(const std::string &precision, bool fuse, StepRun &run) {
    ASSERT_TRUE(compile("tiny", Phase::MemoryPlan, [&](CompileOptions &o) {
      o.batch = kBatch;
      o.seq = kSeq;
      o.lr = 1e-3;
      o.precision = *parsePrecision(precision);
      o.fuseMatmulEpilogue = fuse;
      o.epilogueGeluBiasGrad = true;
      o.epilogueBiasGrad = true;
    }));
    using Epilogue = mlir::gpt::GemmFusion::Epilogue;
    function("train_step").walk<mlir::WalkOrder::PreOrder>([&](mlir::Operation *op) {
      auto fusion = llvm::dyn_cast<mlir::gpt::FusionOp>(op);
      if (std::optional<mlir::gpt::GemmFusion> gemm =
              fusion ? mlir::gpt::matchGemmFusion(fusion) : std::nullopt) {
        run.linearGelu += gemm->epilogue == Epilogue::Gelu;
        run.geluGrad += gemm->epilogue == Epilogue::GeluGrad;
        run.geluBiasGrad += gemm->epilogue == Epilogue::GeluGradSum;
        run.biasGrad += gemm->epilogue == Epilogue::LhsSum;
        return mlir::WalkResult::skip(); // its GELU is the epilogue's
      }
      run.gelu += llvm::isa<mlir::gpt::GeluOp, mlir::gpt::GeluGradOp>(op);
      return mlir::WalkResult::advance();
    });

    std::vector<int32_t> tokens(kBatch * kSeq + 1);
    for (size_t i = 0; i < tokens.size(); ++i)
      tokens[i] = static_cast<int32_t>((i * 7919 + (i / 5) * 31) % kVocab);
    std::vector<int32_t> in(tokens.begin(), tokens.end() - 1), tgt(tokens.begin() + 1, tokens.end());

    run.referenceLoss = referenceFirstLoss(in, tgt, kBatch, kSeq);

    std::unique_ptr<Session> session = hostSession("tiny-epilogue.fb");
    ASSERT_TRUE(session);
    Session &s = *session;
    Status trained = trainSameBatch(s, in, tgt, kSteps, run.losses);
    ASSERT_TRUE(trained) << trained.message();
    for (uint32_t i = 0; i < s.schema().tensors()->size(); ++i) {
      const schema::Tensor &t = s.tensor(i);
      if (t.role() != schema::TensorRole::Parameter)
        continue;
      std::vector<float> p(t.size_bytes() / 4);
      ASSERT_TRUE(s.readTensor(i, p.data(), p.size() * 4));
      run.params.push_back(std::move(p));
      run.names.push_back(t.name()->str());
    }
  }

  /// Largest relative L2 distance of a parameter tensor between the runs.
  static double paramError(const StepRun &a, const StepRun &b) {
    double worst = 0;
    for (size_t t = 0; t < a.params.size(); ++t)
      worst = std::max(worst, relativeL2(a.names[t], a.params[t], b.params[t]));
    return worst;
  }

  void expectClose(const std::string &precision, double lossTolerance, double referenceTolerance,
                   double paramTolerance) {
    StepRun fused, unfused;
    ASSERT_NO_FATAL_FAILURE(train(precision, true, fused));
    ASSERT_NO_FATAL_FAILURE(train(precision, false, unfused));
    int64_t layers = 2; // the tiny preset
    EXPECT_EQ(fused.linearGelu, layers) << precision;
    EXPECT_EQ(fused.geluGrad, 0) << precision; // all with the fc bias gradient
    EXPECT_EQ(fused.geluBiasGrad, layers) << precision;
    EXPECT_EQ(fused.biasGrad, 3 * layers) << precision; // qkv, attention proj, mlp proj
    EXPECT_EQ(fused.gelu, 0) << precision;
    EXPECT_EQ(unfused.linearGelu + unfused.geluGrad + unfused.geluBiasGrad + unfused.biasGrad, 0)
        << precision;
    EXPECT_NEAR(fused.referenceLoss, unfused.referenceLoss,
                referenceTolerance * unfused.referenceLoss)
        << precision;
    EXPECT_LT(fused.losses.back(), fused.losses.front()) << precision << ": the step learns";
    for (int64_t i = 0; i < kSteps; ++i)
      EXPECT_NEAR(fused.losses[i], unfused.losses[i], lossTolerance * unfused.losses[i])
          << precision << " step " << i;
    EXPECT_NEAR(fused.losses[0], fused.referenceLoss, 1e-2 * fused.referenceLoss) << precision;
    EXPECT_LT(paramError(fused, unfused), paramTolerance) << precision;
  }
};

// Measured (tiny, B=2, T=8, lr 1e-3, 5 steps), fused vs unfused: fp32
// losses identical, the fp64 reference losses identical, parameters 3.7e-7
// apart (relative L2, the worst tensor); bf16 losses up to 3e-5 relative
// apart, reference losses 1.5e-5 (GELU of the unrounded pre-activation),
// parameters 8.6e-3 (h.1.mlp.c_proj.weight). Bounds about 3x and more.
TEST_F(MatmulEpilogueTest, Fp32FusedStepMatchesUnfused) { expectClose("fp32", 1e-6, 1e-12, 1e-5); }

TEST_F(MatmulEpilogueTest, Bf16FusedStepMatchesUnfused) { expectClose("bf16", 1e-4, 1e-4, 3e-2); }

} // namespace

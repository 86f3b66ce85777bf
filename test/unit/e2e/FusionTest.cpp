//===- FusionTest.cpp - fused and unfused train steps compute the same ---===//
//
// gpt-fuse-elementwise only changes where values live: the kernels of a
// gpt.fusion round every bf16 value as if it were stored. So the `tiny`
// preset, compiled for the Host target with and without the pass, must
// give bit-identical losses and parameters over several AdamW steps, in
// bf16 (where fusion removes most casts) and fp32; and the reference
// interpreter, which runs a fusion's body op by op, must give the fused IR
// the same fp64 loss as the unfused IR.
//
//===----------------------------------------------------------------------===//

#include "e2e/HostTraining.h"

#include "dialects/GPT/IR/GPTOps.h"

#include <cstring>
#include <random>

using namespace gptc;
using namespace gptc::testing;

namespace {

constexpr int64_t kBatch = 2, kSeq = 8, kSteps = 5, kVocab = 60;

struct Trace {
  std::vector<float> losses;
  std::vector<std::vector<uint8_t>> params;
  int64_t fusions = 0;
  double referenceLoss = 0; // fp64 interpreter, first step
};

class FusionTest : public HostTrainingTest {
protected:
  void train(const std::string &precision, bool fuse, Trace &run) {
    ASSERT_TRUE(compile("tiny", Phase::MemoryPlan, [&](CompileOptions &o) {
      o.batch = kBatch;
      o.seq = kSeq;
      o.lr = 1e-2;
      o.precision = *parsePrecision(precision);
      o.fuseElementwise = fuse;
    }));
    // gpt-fuse-elementwise's fusions: the GEMM fusions of the matmul
    // epilogues are in both steps.
    function("train_step").walk([&](mlir::gpt::FusionOp f) {
      run.fusions += !mlir::gpt::matchGemmFusion(f);
    });

    std::mt19937 rng(7);
    std::vector<int32_t> tokens(kBatch * kSeq + 1);
    for (int32_t &t : tokens)
      t = static_cast<int32_t>(rng() % kVocab);
    std::vector<int32_t> in(tokens.begin(), tokens.end() - 1), tgt(tokens.begin() + 1, tokens.end());

    // Reference: @init, zero moments, one @train_step.
    run.referenceLoss = referenceFirstLoss(in, tgt, kBatch, kSeq);

    std::unique_ptr<Session> session = hostSession("tiny-fusion.fb");
    ASSERT_TRUE(session);
    Session &s = *session;
    Status trained = trainSameBatch(s, in, tgt, kSteps, run.losses);
    ASSERT_TRUE(trained) << trained.message();
    for (uint32_t i = 0; i < s.schema().tensors()->size(); ++i)
      if (s.tensor(i).role() == schema::TensorRole::Parameter) {
        std::vector<uint8_t> p(s.tensor(i).size_bytes());
        Status read = s.readTensor(i, p.data(), p.size());
        ASSERT_TRUE(read) << read.message();
        run.params.push_back(std::move(p));
      }
  }

  void expectSame(const std::string &precision) {
    Trace fused, unfused;
    ASSERT_NO_FATAL_FAILURE(train(precision, true, fused));
    ASSERT_NO_FATAL_FAILURE(train(precision, false, unfused));
    EXPECT_GT(fused.fusions, 0);
    EXPECT_EQ(unfused.fusions, 0);
    // The step learns (so identical curves are not two constant ones).
    EXPECT_LT(fused.losses.back(), fused.losses.front() - 0.05);
    for (int64_t i = 0; i < kSteps; ++i)
      EXPECT_EQ(std::memcmp(&fused.losses[i], &unfused.losses[i], sizeof(float)), 0)
          << precision << " step " << i << ": " << fused.losses[i] << " vs " << unfused.losses[i];
    ASSERT_EQ(fused.params.size(), unfused.params.size());
    for (size_t i = 0; i < fused.params.size(); ++i)
      EXPECT_TRUE(fused.params[i] == unfused.params[i]) << precision << " parameter " << i;
    EXPECT_EQ(fused.referenceLoss, unfused.referenceLoss) << precision;
    EXPECT_NEAR(fused.losses[0], fused.referenceLoss, 1e-3 * fused.referenceLoss) << precision;
  }
};

TEST_F(FusionTest, Bf16FusedStepIsBitIdentical) { expectSame("bf16"); }

TEST_F(FusionTest, Fp32FusedStepIsBitIdentical) { expectSame("fp32"); }

} // namespace

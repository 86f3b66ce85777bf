//===- HostTrainTest.cpp - compile -> step.fb -> train on the host target ===//
//
// The whole path without a GPU: gptc's pipeline and codegen build a Host
// executable of the `mini` preset (GPT-2's vocabulary), the runtime's Host
// backend runs @init and 20 @train_step steps on the Austen corpus, and
// every loss is compared with the fp64 reference interpreter running the
// same compiled train step on the same batches.
//
//===----------------------------------------------------------------------===//

#include "TestUtils.h"

#include "compiler/Codegen/EmitExecutable.h"
#include "runtime/data/TokenFile.h"
#include "runtime/executor/HostBackend.h"
#include "runtime/executor/Session.h"

using namespace gptc;
using namespace gptc::testing;
using reference::Precision;
using reference::Tensor;

namespace {

constexpr int64_t kBatch = 2, kSeq = 32, kSteps = 20;

TEST_F(GPT2Test, HostExecutableTrainsLikeTheReference) {
  auto tokens = data::readTokenFile(GPTC_DATA_DIR "/austen_train.bin", 50257);
  ASSERT_TRUE(tokens) << tokens.status().message()
                      << " (scripts/setup.sh builds data/austen_train.bin)";
  ASSERT_TRUE(compile("mini", Phase::MemoryPlan, [](PipelineOptions &o) {
    o.batch = kBatch;
    o.seq = kSeq;
    o.lr = 1e-3;
  }));
  codegen::EmitOptions emit;
  emit.target = codegen::EmitOptions::Target::Host;
  auto bytes = codegen::emitExecutable(*module, emit);
  ASSERT_TRUE(mlir::succeeded(bytes)) << diagnostics;
  auto exe = Executable::loadBytes(*bytes, "mini-host.fb");
  ASSERT_TRUE(exe) << exe.status().message();
  auto session = Session::create(std::move(*exe), createHostBackend);
  ASSERT_TRUE(session) << session.status().message();
  Session &s = **session;

  // Runtime: @init, zero moments.
  std::vector<int32_t> seed = {1337};
  ASSERT_TRUE(s.setInput("init", "seed", seed));
  ASSERT_TRUE(s.run("init"));
  ASSERT_TRUE(s.zeroTensors(schema::TensorRole::OptimizerState));

  // Reference: the same @init on the interpreter, zero moments.
  std::vector<Tensor> ref = evaluate("init", {Tensor({}, 1337.0)});
  ASSERT_FALSE(ref.empty());
  size_t n = ref.size();
  for (int copy = 0; copy < 2; ++copy)
    for (size_t i = 0; i < n; ++i)
      ref.emplace_back(ref[i].shape, 0.0);

  std::vector<double> hostLoss, refLoss;
  const int64_t window = kBatch * kSeq;
  for (int64_t step = 0; step < kSteps; ++step) {
    std::vector<int32_t> in(window), tgt(window);
    for (int64_t j = 0; j < window; ++j) {
      in[j] = (*tokens)[step * window + j];
      tgt[j] = (*tokens)[step * window + j + 1];
    }
    std::vector<int32_t> stepIn = {static_cast<int32_t>(step)};
    ASSERT_TRUE(s.setInput("train_step", "tokens", in));
    ASSERT_TRUE(s.setInput("train_step", "targets", tgt));
    ASSERT_TRUE(s.setInput("train_step", "step", stepIn));
    std::vector<float> lrScale = {1.0f};
    ASSERT_TRUE(s.setInput("train_step", "lr_scale", lrScale));
    Status ran = s.run("train_step");
    ASSERT_TRUE(ran) << ran.message();
    auto loss = s.getScalarF32("train_step", "loss");
    ASSERT_TRUE(loss) << loss.status().message();
    hostLoss.push_back(*loss);

    std::vector<Tensor> args = ref;
    args.emplace_back(std::vector<int64_t>{1, kBatch, kSeq},
                      std::vector<double>(in.begin(), in.end()));
    args.emplace_back(std::vector<int64_t>{1, kBatch, kSeq},
                      std::vector<double>(tgt.begin(), tgt.end()));
    args.emplace_back(std::vector<int64_t>{}, static_cast<double>(step));
    args.emplace_back(std::vector<int64_t>{}, 1.0); // lr_scale
    std::vector<Tensor> out = evaluate("train_step", args, Precision::F64);
    ASSERT_FALSE(out.empty());
    refLoss.push_back(out[output("train_step", "loss")].data[0]);
    out.resize(3 * n);
    ref = std::move(out);
  }
  // fp32 kernels against the fp64 reference: 1e-3 relative over 20 steps.
  for (int64_t i = 0; i < kSteps; ++i)
    EXPECT_NEAR(hostLoss[i], refLoss[i], 1e-3 * refLoss[i]) << "step " << i;
  EXPECT_NEAR(hostLoss.front(), std::log(50257.0), 0.3);
  EXPECT_LT(hostLoss.back(), hostLoss.front() - 1.0)
      << "first " << hostLoss.front() << ", last " << hostLoss.back();
}

} // namespace

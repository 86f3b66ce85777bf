//===- FusionTest.cpp - gpt.fusion kernels: fewer launches, same bits -----===//
//
// A step with a chain (add -> bias_add -> gelu -> cast -> cast -> scale) and
// three sibling weight casts of different sizes is lowered with and without
// gpt-fuse-elementwise: fused, it is two launches instead of nine, and the
// Host executables give bit-identical outputs, which also match the fp64
// reference interpreter on the fused IR.
//
//===----------------------------------------------------------------------===//

#include "TestUtils.h"

#include "compiler/Codegen/EmitExecutable.h"
#include "compiler/Codegen/Lowering.h"
#include "compiler/Transforms/Passes.h"
#include "runtime/executor/HostBackend.h"
#include "runtime/executor/Session.h"

#include "mlir/Pass/PassManager.h"

#include <cmath>
#include <cstring>

using namespace gptc;
using namespace gptc::testing;
using reference::Tensor;

namespace {

const std::string kSource = std::string(kStubPrograms) + R"mlir(
func.func @train_step(%x: tensor<6x16xf32> {gpt.input = "x"}, %y: tensor<6x16xf32> {gpt.input = "y"},
                      %b: tensor<16xf32> {gpt.input = "b"}, %w1: tensor<40x16xf32> {gpt.input = "w1"},
                      %w2: tensor<6x16xf32> {gpt.input = "w2"}, %w3: tensor<16xf32> {gpt.input = "w3"})
    -> (tensor<6x16xf32> {gpt.output = "out"}, tensor<6x16xf32> {gpt.output = "gelu"},
        tensor<40x16xbf16> {gpt.output = "w1h"}, tensor<6x16xbf16> {gpt.output = "w2h"},
        tensor<16xbf16> {gpt.output = "w3h"}) {
  %w1h = gpt.cast %w1 : tensor<40x16xf32> to tensor<40x16xbf16>
  %s = gpt.add %x, %y : tensor<6x16xf32>
  %w2h = gpt.cast %w2 : tensor<6x16xf32> to tensor<6x16xbf16>
  %z = gpt.bias_add %s, %b : (tensor<6x16xf32>, tensor<16xf32>) -> tensor<6x16xf32>
  %g = gpt.gelu %z : tensor<6x16xf32>
  %gh = gpt.cast %g : tensor<6x16xf32> to tensor<6x16xbf16>
  %gf = gpt.cast %gh : tensor<6x16xbf16> to tensor<6x16xf32>
  %o = gpt.scale %gf {factor = 3.0 : f64} : tensor<6x16xf32>
  %w3h = gpt.cast %w3 : tensor<16xf32> to tensor<16xbf16>
  return %o, %g, %w1h, %w2h, %w3h : tensor<6x16xf32>, tensor<6x16xf32>, tensor<40x16xbf16>, tensor<6x16xbf16>, tensor<16xbf16>
}
)mlir";

const char *kNames[] = {"x", "y", "b", "w1", "w2", "w3"};
const char *kOutputs[] = {"out", "gelu", "w1h", "w2h", "w3h"};

struct Compiled {
  int64_t launches = 0, fusionLaunches = 0;
  std::vector<std::vector<uint8_t>> outputs;
};

class FusionTest : public ReferenceTest {
protected:
  std::vector<std::vector<float>> inputs;

  void SetUp() override {
    int64_t sizes[] = {96, 96, 16, 640, 96, 16};
    for (int64_t k = 0; k < 6; ++k) {
      std::vector<float> v(sizes[k]);
      for (int64_t i = 0; i < sizes[k]; ++i)
        v[i] = static_cast<float>(std::sin(0.7 * i + k) * (1.0 + 0.3 * k) + 0.001 * i);
      inputs.push_back(std::move(v));
    }
  }

  void build(bool fuse, Compiled &c) {
    module = parse(kSource);
    ASSERT_TRUE(module);
    ASSERT_TRUE(planPrograms([&](mlir::PassManager &pm) {
      if (fuse)
        pm.addPass(createFuseElementwisePass());
    }));

    auto lowered = codegen::lowerPrograms(*module, {"train_step"});
    ASSERT_TRUE(mlir::succeeded(lowered)) << diagnostics;
    for (const codegen::Command &cmd : lowered->programs[0].commands)
      if (cmd.kind == codegen::Command::Launch) {
        ++c.launches;
        c.fusionLaunches += cmd.op == "gpt.fusion";
      }

    codegen::EmitOptions emit;
    emit.target = codegen::EmitOptions::Target::Host;
    auto bytes = codegen::emitExecutable(*module, emit);
    ASSERT_TRUE(mlir::succeeded(bytes)) << diagnostics;
    auto exe = Executable::loadBytes(*bytes, "fusion-host.fb");
    ASSERT_TRUE(exe) << exe.status().message();
    auto session = Session::create(std::move(*exe), createHostBackend);
    ASSERT_TRUE(session) << session.status().message();
    Session &s = **session;
    for (size_t k = 0; k < 6; ++k)
      ASSERT_TRUE(s.setInput("train_step", kNames[k], inputs[k]));
    Status ran = s.run("train_step");
    ASSERT_TRUE(ran) << ran.message();
    for (const char *name : kOutputs) {
      auto out = s.getOutput("train_step", name);
      ASSERT_TRUE(out) << name << ": " << out.status().message();
      c.outputs.push_back(std::move(*out));
    }
  }
};

TEST_F(FusionTest, FusedKernelsLaunchLessAndComputeTheSameBits) {
  Compiled unfused, fused;
  ASSERT_NO_FATAL_FAILURE(build(false, unfused));
  ASSERT_NO_FATAL_FAILURE(build(true, fused));
  EXPECT_EQ(unfused.launches, 9);
  EXPECT_EQ(unfused.fusionLaunches, 0);
  // The chain, and the three sibling casts (three sizes, one launch).
  EXPECT_EQ(fused.launches, 2);
  EXPECT_EQ(fused.fusionLaunches, 2);
  ASSERT_EQ(fused.outputs.size(), unfused.outputs.size());
  for (size_t o = 0; o < fused.outputs.size(); ++o)
    EXPECT_TRUE(fused.outputs[o] == unfused.outputs[o]) << kOutputs[o];

  // The fused IR on the reference interpreter (module is the fused one).
  auto fn = module->lookupSymbol<mlir::func::FuncOp>("train_step");
  ASSERT_TRUE(fn);
  std::vector<Tensor> args;
  for (auto [k, arg] : llvm::enumerate(fn.getArguments())) {
    auto shape = llvm::cast<mlir::RankedTensorType>(arg.getType()).getShape();
    args.emplace_back(std::vector<int64_t>(shape.begin(), shape.end()),
                      std::vector<double>(inputs[k].begin(), inputs[k].end()));
  }
  auto ref = reference::evaluate(fn, args, reference::Precision::F64);
  ASSERT_TRUE(mlir::succeeded(ref)) << diagnostics;
  // bf16 casts of inputs exactly; gelu within fp32 rounding of fp64; `out`
  // rounds gelu to bf16, where an fp32-vs-fp64 difference may move one ulp.
  for (size_t o = 0; o < 5; ++o) {
    const Tensor &want = (*ref)[o];
    bool bf16 = o >= 2;
    ASSERT_EQ(fused.outputs[o].size(), want.data.size() * (bf16 ? 2 : 4)) << kOutputs[o];
    for (size_t i = 0; i < want.data.size(); ++i) {
      float got;
      if (bf16) {
        uint32_t bits = uint32_t(fused.outputs[o][2 * i] | (fused.outputs[o][2 * i + 1] << 8)) << 16;
        std::memcpy(&got, &bits, 4);
        EXPECT_EQ(got, want.data[i]) << kOutputs[o] << "[" << i << "]";
      } else {
        std::memcpy(&got, fused.outputs[o].data() + 4 * i, 4);
        double tol = o == 0 ? 8e-3 : 1e-5;
        EXPECT_NEAR(got, want.data[i], tol * (1 + std::abs(want.data[i])))
            << kOutputs[o] << "[" << i << "]";
      }
    }
  }
}

} // namespace

//===- FlashAttentionTest.cpp - the tensor-core attention's code ----------===//
//
// The flash kernels are CUDA-only (mma.sync or wgmma, warp shuffles) and
// CI has no GPU, so these tests check what codegen chose and emitted: flash
// kernels for bf16 attention on CUDA with their tensor-core instructions in
// the PTX, the scalar kernels for fp32, for --flash-attention=false and for
// the Host target. Their numerics are checked on the H200 against the scalar
// kernels (bench/device/run_bf16.sh's flash comparison, results in
// bench/results/2026-12.md), and on the Host target here the scalar kernels that
// check is made against are compared with the fp64 reference.
//
//===----------------------------------------------------------------------===//

#include "TestUtils.h"

#include "compiler/Codegen/EmitExecutable.h"
#include "compiler/Transforms/Passes.h"
#include "runtime/executable/Executable.h"
#include "runtime/executor/HostBackend.h"
#include "runtime/executor/Session.h"

#include "mlir/Pass/PassManager.h"

#include <algorithm>
#include <cmath>
#include <map>

using namespace gptc;
using namespace gptc::testing;
using reference::Tensor;

namespace {

// Three 16-row tiles per head (masking on the diagonal, full tiles below
// it) and a head dimension of two mma k-steps.
constexpr int64_t kB = 2, kT = 48, kH = 2, kD = 32, kC = kH * kD;

/// With `sums`, the gradient is an attention-gradient column-sum fusion's
/// (gpt-fuse-elementwise's: in f32, each result narrowed once) and its
/// column sums are a third output, "db".
std::string source(const std::string &elt, int64_t seq = kT, bool sums = false) {
  std::string t = std::to_string(seq);
  std::string qkv = "tensor<2x" + t + "x192x", y = "tensor<2x" + t + "x64x";
  std::string body;
  auto f32 = [](const std::string &t) { return t + "f32>"; };
  auto low = [&](const std::string &t) { return t + elt + ">"; };
  body += "  %q = gpt.cast %qkv : " + f32(qkv) + " to " + low(qkv) + "\n";
  body += "  %g = gpt.cast %dy : " + f32(y) + " to " + low(y) + "\n";
  std::string lse = "tensor<2x2x" + t + "xf32>";
  body += "  %y, %lse = gpt.causal_attention %q {num_heads = 2 : i64} : (" + low(qkv) +
          ") -> (" + low(y) + ", " + lse + ")\n";
  if (sums) {
    // A narrow value in f32, or an f32 one as it is.
    auto wide = [&](const std::string &v, const std::string &t) {
      if (elt == "f32")
        return v;
      body += "    " + v + "w = gpt.cast " + v + " : " + low(t) + " to " + f32(t) + "\n";
      return v + "w";
    };
    auto narrow = [&](const std::string &v, const std::string &t) {
      if (elt == "f32")
        return v;
      body += "    " + v + "h = gpt.cast " + v + " : " + f32(t) + " to " + low(t) + "\n";
      return v + "h";
    };
    std::string sum = "tensor<192x";
    body += "  %d, %db = gpt.fusion (%g, %q, %y, %lse) : (" + low(y) + ", " + low(qkv) + ", " +
            low(y) + ", " + lse + ") -> (" + low(qkv) + ", " + low(sum) + ") {\n";
    body += "  ^bb0(%ga: " + low(y) + ", %qa: " + low(qkv) + ", %ya: " + low(y) + ", %la: " + lse +
            "):\n";
    std::string gw = wide("%ga", y), qw = wide("%qa", qkv), yw = wide("%ya", y);
    body += "    %r = gpt.causal_attention_grad " + gw + ", " + qw + ", " + yw +
            ", %la {num_heads = 2 : i64} : (" + f32(y) + ", " + f32(qkv) + ", " + f32(y) + ", " +
            lse + ") -> " + f32(qkv) + "\n";
    body += "    %s = gpt.reduce sum %r dims [0, 1] : (" + f32(qkv) + ") -> " + f32(sum) + "\n";
    std::string rh = narrow("%r", qkv), sh = narrow("%s", sum);
    body += "    gpt.yield " + rh + ", " + sh + " : " + low(qkv) + ", " + low(sum) + "\n  }\n";
    body += "  %dbf = gpt.cast %db : " + low(sum) + " to tensor<192xf32>\n";
  } else {
    body += "  %d = gpt.causal_attention_grad %g, %q, %y, %lse {num_heads = 2 : i64} : (" +
            low(y) + ", " + low(qkv) + ", " + low(y) + ", " + lse + ") -> " + low(qkv) + "\n";
  }
  body += "  %yf = gpt.cast %y : " + low(y) + " to " + f32(y) + "\n";
  body += "  %df = gpt.cast %d : " + low(qkv) + " to " + f32(qkv) + "\n";
  return std::string(kStubPrograms) +
         "func.func @train_step(%qkv: " + f32(qkv) + " {gpt.input = \"qkv\"}, %dy: " + f32(y) +
         " {gpt.input = \"dy\"}) -> (" + f32(y) + " {gpt.output = \"y\"}, " + f32(qkv) +
         " {gpt.output = \"dqkv\"}" + (sums ? ", tensor<192xf32> {gpt.output = \"db\"}" : "") +
         ") {\n" + body + "  return %yf, %df" + (sums ? ", %dbf" : "") + " : " + f32(y) + ", " +
         f32(qkv) + (sums ? ", tensor<192xf32>" : "") + "\n}\n";
}

bool contains(const std::vector<uint8_t> &bytes, const std::string &s) {
  return std::search(bytes.begin(), bytes.end(), s.begin(), s.end()) != bytes.end();
}

const char *kMma = "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32";

class FlashAttentionTest : public ReferenceTest {
protected:
  std::vector<uint8_t> compile(const std::string &elt, codegen::EmitOptions emit,
                               int64_t seq = kT, bool sums = false) {
    module = parse(source(elt, seq, sums));
    if (!module)
      return {};
    if (!planPrograms())
      return {};
    auto bytes = codegen::emitExecutable(*module, emit);
    EXPECT_TRUE(mlir::succeeded(bytes)) << diagnostics;
    return mlir::succeeded(bytes) ? *bytes : std::vector<uint8_t>{};
  }
  /// The Host target's scalar kernels against the fp64 interpreter.
  void checkHostAgainstReference(bool sums);
};

TEST_F(FlashAttentionTest, Bf16OnCudaUsesTheTensorCoreKernels) {
  std::vector<uint8_t> bytes = compile("bf16", {});
  ASSERT_FALSE(bytes.empty());
  EXPECT_TRUE(contains(bytes, "flash_attention_forward"));
  EXPECT_TRUE(contains(bytes, "flash_attention_backward_q"));
  EXPECT_TRUE(contains(bytes, "flash_attention_backward_kv"));
  EXPECT_FALSE(contains(bytes, "attention_backward_v"));
  EXPECT_TRUE(contains(bytes, kMma));
  EXPECT_TRUE(contains(bytes, "shfl.sync.bfly"));
}

// T = 48 is not a multiple of 128: each warp reads its keys itself.
TEST_F(FlashAttentionTest, ShortSequencesUseTheUnblockedKernels) {
  std::vector<uint8_t> bytes = compile("bf16", {});
  ASSERT_FALSE(bytes.empty());
  EXPECT_FALSE(contains(bytes, "bar.sync"));
  EXPECT_FALSE(contains(bytes, "st.shared"));
  EXPECT_FALSE(contains(bytes, "cp.async"));
}

// T = 256: blocks of 8 warps stage 64 rows at a time in shared memory,
// copied asynchronously (16 bytes per cp.async) three stages ahead.
TEST_F(FlashAttentionTest, LongSequencesStageThroughSharedMemory) {
  codegen::EmitOptions emit;
  emit.warpgroupMma = false;
  std::vector<uint8_t> bytes = compile("bf16", emit, 256);
  ASSERT_FALSE(bytes.empty());
  EXPECT_TRUE(contains(bytes, "flash_attention_backward_kv"));
  EXPECT_TRUE(contains(bytes, kMma));
  EXPECT_TRUE(contains(bytes, "bar.sync"));
  EXPECT_TRUE(contains(bytes, "cp.async.cg.shared.global"));
  EXPECT_TRUE(contains(bytes, "cp.async.commit_group"));
  EXPECT_TRUE(contains(bytes, "cp.async.wait_group \t2;"));
  EXPECT_TRUE(contains(bytes, "ldmatrix.sync.aligned.m8n8.x4.shared.b16"));
  EXPECT_TRUE(contains(bytes, "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16"));
}

// The staging buffers are dynamic shared memory: every flash launch asks
// for 2 operands x 4 buffers x 64 rows (+ 8 padding columns for ldmatrix,
// none for wgmma's swizzled rows), the dK/dV kernel for the row statistics
// (4 x 64 x 2 floats) as well, each piece 1 KiB aligned, and 1 KiB to
// align the start.
TEST_F(FlashAttentionTest, BlockedLaunchesAskForTheirSharedMemory) {
  for (bool warpgroup : {true, false}) {
    codegen::EmitOptions emit;
    emit.warpgroupMma = warpgroup;
    std::vector<uint8_t> bytes = compile("bf16", emit, 256);
    ASSERT_FALSE(bytes.empty());
    auto exe = Executable::loadBytes(bytes, "flash");
    ASSERT_TRUE(exe) << exe.status().message();
    std::map<std::string, uint32_t> shared;
    for (const schema::Command *cmd : *exe->findProgram("train_step")->commands())
      if (const auto *launch = cmd->op_as_LaunchKernel()) {
        std::string name = (*exe)->kernels()->Get(launch->kernel())->name()->str();
        shared[name.substr(0, name.rfind('_'))] = launch->shared_bytes();
      }
    int64_t operand = 4 * 64 * (warpgroup ? kD : kD + 8) * 2; // a multiple of 1 KiB
    EXPECT_EQ(shared["flash_attention_forward"], 2 * operand + 1024) << warpgroup;
    EXPECT_EQ(shared["flash_attention_backward_q"], 2 * operand + 1024) << warpgroup;
    EXPECT_EQ(shared["flash_attention_backward_kv"], 2 * operand + 2048 + 1024) << warpgroup;
  }
}

// On sm_90 the blocked kernels multiply on wgmma (forward scores 64 x 64
// per warpgroup, backward scores 64 x 32, products with v, dy, q and k
// 64 x d) with B read from swizzled shared memory after an async-proxy
// fence, and the module is compiled for sm_90a; --warpgroup-mma=false
// keeps mma.sync and plain sm_90.
TEST_F(FlashAttentionTest, WarpgroupForwardOnSm90) {
  std::vector<uint8_t> bytes = compile("bf16", {}, 256);
  ASSERT_FALSE(bytes.empty());
  EXPECT_TRUE(contains(bytes, ".target sm_90a"));
  EXPECT_TRUE(contains(bytes, "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16"));
  EXPECT_TRUE(contains(bytes, "wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16"));
  EXPECT_TRUE(contains(bytes, "wgmma.wait_group.sync.aligned 0;"));
  EXPECT_FALSE(contains(bytes, "ldmatrix"));
  EXPECT_TRUE(contains(bytes, "fence.proxy.async.shared::cta;"));

  codegen::EmitOptions off;
  off.warpgroupMma = false;
  bytes = compile("bf16", off, 256);
  ASSERT_FALSE(bytes.empty());
  EXPECT_FALSE(contains(bytes, "wgmma"));
  EXPECT_FALSE(contains(bytes, ".target sm_90a"));
  EXPECT_TRUE(contains(bytes, ".target sm_90"));
}

// The backward kernels accumulate dS / scale: the softmax scale (1/sqrt(32),
// f32 0x3E3504F3) must multiply dq and dk at the store, in the unblocked
// (T = 48) and the blocked (T = 256, mma.sync and wgmma) kernels alike.
TEST_F(FlashAttentionTest, BackwardKernelsScaleDqAndDk) {
  for (auto [seq, warpgroup] : {std::pair{kT, false}, {256, false}, {256, true}}) {
    codegen::EmitOptions emit;
    emit.warpgroupMma = warpgroup;
    std::vector<uint8_t> bytes = compile("bf16", emit, seq);
    ASSERT_FALSE(bytes.empty());
    std::string ptx(bytes.begin(), bytes.end());
    for (const char *entry : {".entry flash_attention_backward_q", ".entry flash_attention_backward_kv"}) {
      size_t at = ptx.find(entry);
      ASSERT_NE(at, std::string::npos) << entry;
      // Up to the next entry: inline wgmma blocks have braces of their own.
      std::string body = ptx.substr(at, ptx.find(".entry", at + 1) - at);
      EXPECT_NE(body.find("0f3E3504F3"), std::string::npos)
          << entry << " at T = " << seq << (warpgroup ? " (wgmma)" : "");
    }
  }
}

// gpt.causal_attention_grad_sum on CUDA: the unblocked and the blocked
// (mma.sync and wgmma) backward kernels all fold their 16-row tiles over
// the lanes' row bits (xor 16, 8, 4: the other flash shuffles are xor 1
// and 2), and no column reduction reads dqkv.
TEST_F(FlashAttentionTest, AttentionGradSumStoresTileSumsInEveryBackwardKernel) {
  for (auto [seq, warpgroup] : {std::pair{kT, false}, {256, false}, {256, true}}) {
    codegen::EmitOptions emit;
    emit.warpgroupMma = warpgroup;
    std::vector<uint8_t> bytes = compile("bf16", emit, seq, /*sums=*/true);
    ASSERT_FALSE(bytes.empty());
    std::string ptx(bytes.begin(), bytes.end());
    EXPECT_TRUE(contains(bytes, "attention_backward_sum"));
    EXPECT_FALSE(contains(bytes, "reduce_leading"));
    for (const char *entry : {".entry flash_attention_backward_q", ".entry flash_attention_backward_kv"}) {
      size_t at = ptx.find(entry);
      ASSERT_NE(at, std::string::npos) << entry;
      std::string body = ptx.substr(at, ptx.find(".entry", at + 1) - at);
      // Recursive halving over lane bits 4, 3, 2.
      for (const char *mask : {", 16, 31,", ", 8, 31,", ", 4, 31,"})
        EXPECT_NE(body.find(mask), std::string::npos)
            << entry << " has no xor shuffle" << mask << " at T = " << seq;
    }
  }
}

// Other chips keep mma.sync whatever the flag says.
TEST_F(FlashAttentionTest, WarpgroupNeedsSm90) {
  codegen::EmitOptions emit;
  emit.chip = "sm_80";
  std::vector<uint8_t> bytes = compile("bf16", emit, 256);
  ASSERT_FALSE(bytes.empty());
  EXPECT_FALSE(contains(bytes, "wgmma"));
  EXPECT_TRUE(contains(bytes, ".target sm_80"));
}

// The blocked forward and dQ kernels ask ptxas for two resident blocks per
// SM (register cap 128); the dK/dV kernel, with two accumulators, does not.
TEST_F(FlashAttentionTest, BlockedKernelsAskForTwoBlocksPerSM) {
  std::vector<uint8_t> bytes = compile("bf16", {}, 256);
  ASSERT_FALSE(bytes.empty());
  std::string ptx(bytes.begin(), bytes.end());
  // An entry's performance directives sit between its name and its body.
  auto directives = [&](const std::string &entry) {
    size_t at = ptx.find(".entry " + entry);
    EXPECT_NE(at, std::string::npos) << entry;
    return at == std::string::npos ? std::string() : ptx.substr(at, ptx.find('{', at) - at);
  };
  std::string fwd = directives("flash_attention_forward");
  EXPECT_NE(fwd.find(".maxntid 256, 1, 1"), std::string::npos) << fwd;
  EXPECT_NE(fwd.find(".minnctapersm 2"), std::string::npos) << fwd;
  EXPECT_NE(directives("flash_attention_backward_q").find(".minnctapersm 2"), std::string::npos);
  EXPECT_EQ(directives("flash_attention_backward_kv").find(".minnctapersm"), std::string::npos);
}

// The blocked kernels assume 256-thread blocks; other launches keep the
// per-warp kernels.
TEST_F(FlashAttentionTest, OtherBlockSizesUseTheUnblockedKernels) {
  codegen::EmitOptions emit;
  emit.blockSize = 128;
  std::vector<uint8_t> bytes = compile("bf16", emit, 256);
  ASSERT_FALSE(bytes.empty());
  EXPECT_TRUE(contains(bytes, kMma));
  EXPECT_FALSE(contains(bytes, "bar.sync"));
}

TEST_F(FlashAttentionTest, DisabledFlagKeepsTheScalarKernels) {
  codegen::EmitOptions emit;
  emit.flashAttention = false;
  std::vector<uint8_t> bytes = compile("bf16", emit);
  ASSERT_FALSE(bytes.empty());
  EXPECT_FALSE(contains(bytes, "flash_attention"));
  EXPECT_TRUE(contains(bytes, "attention_backward_v"));
  EXPECT_FALSE(contains(bytes, kMma));
}

TEST_F(FlashAttentionTest, Fp32KeepsTheScalarKernels) {
  std::vector<uint8_t> bytes = compile("f32", {});
  ASSERT_FALSE(bytes.empty());
  EXPECT_FALSE(contains(bytes, "flash_attention"));
  EXPECT_FALSE(contains(bytes, kMma));
}

void FlashAttentionTest::checkHostAgainstReference(bool sums) {
  codegen::EmitOptions emit;
  emit.target = codegen::EmitOptions::Target::Host;
  std::vector<uint8_t> bytes = compile("bf16", emit, kT, sums);
  ASSERT_FALSE(bytes.empty());
  EXPECT_FALSE(contains(bytes, "flash_attention"));

  std::vector<float> qkv(kB * kT * 3 * kC), dy(kB * kT * kC);
  for (size_t i = 0; i < qkv.size(); ++i)
    qkv[i] = static_cast<float>(std::sin(0.731 * i) * 1.5);
  for (size_t i = 0; i < dy.size(); ++i)
    dy[i] = static_cast<float>(std::cos(0.377 * i));
  auto fn = module->lookupSymbol<mlir::func::FuncOp>("train_step");
  ASSERT_TRUE(fn);
  auto ref = reference::evaluate(
      fn,
      {Tensor({kB, kT, 3 * kC}, std::vector<double>(qkv.begin(), qkv.end())),
       Tensor({kB, kT, kC}, std::vector<double>(dy.begin(), dy.end()))},
      reference::Precision::F64);
  ASSERT_TRUE(mlir::succeeded(ref)) << diagnostics;

  auto exe = Executable::loadBytes(bytes, "attention-host.fb");
  ASSERT_TRUE(exe) << exe.status().message();
  auto session = Session::create(std::move(*exe), createHostBackend);
  ASSERT_TRUE(session) << session.status().message();
  Session &s = **session;
  ASSERT_TRUE(s.setInput("train_step", "qkv", qkv));
  ASSERT_TRUE(s.setInput("train_step", "dy", dy));
  Status ran = s.run("train_step");
  ASSERT_TRUE(ran) << ran.message();
  const char *names[] = {"y", "dqkv", "db"};
  for (size_t o = 0; o < (sums ? 3u : 2u); ++o) {
    auto out = s.getOutput("train_step", names[o]);
    ASSERT_TRUE(out) << out.status().message();
    const Tensor &want = (*ref)[o];
    ASSERT_EQ(out->size(), want.data.size() * sizeof(float));
    const float *got = reinterpret_cast<const float *>(out->data());
    double scale = 0;
    for (double v : want.data)
      scale = std::max(scale, std::abs(v));
    ASSERT_GT(scale, 0.1) << names[o] << " is degenerate";
    // Results are bf16 (8 bits of mantissa); sums round differently.
    for (size_t i = 0; i < want.data.size(); ++i)
      EXPECT_NEAR(got[i], want.data[i], 2e-2 * scale) << names[o] << "[" << i << "]";
  }
}

// The reference the device check compares flash with: the scalar kernels
// on bf16 attention, against the fp64 interpreter (which rounds to bf16
// after every op as the kernels do).
TEST_F(FlashAttentionTest, HostScalarKernelsMatchTheReferenceInBf16) {
  checkHostAgainstReference(/*sums=*/false);
}

// The same with gpt.causal_attention_grad_sum: the column sums of dqkv (the
// qkv bias gradient) as well. The reference sums the unrounded gradient,
// the scalar kernels' reduction the stored bf16 one.
TEST_F(FlashAttentionTest, HostAttentionGradSumMatchesTheReferenceInBf16) {
  checkHostAgainstReference(/*sums=*/true);
}

} // namespace

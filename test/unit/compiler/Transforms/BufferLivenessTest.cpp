//===- BufferLivenessTest.cpp - live intervals of activation buffers -----===//

#include "TestUtils.h"

#include "compiler/Transforms/BufferLiveness.h"
#include "compiler/Transforms/Passes.h"

using namespace gptc;
using namespace gptc::testing;

namespace {

constexpr const char *kProgram = R"mlir(
func.func @f(%x: tensor<64xf32> {gpt.input = "x"}) -> tensor<8x8xf32> {
  %a = gpt.exp %x : tensor<64xf32>
  %r = gpt.reshape %a : tensor<64xf32> to tensor<8x8xf32>
  %b = gpt.tanh %r : tensor<8x8xf32>
  %c = gpt.neg %b : tensor<8x8xf32>
  %d = gpt.add %c, %r : tensor<8x8xf32>
  return %d : tensor<8x8xf32>
}
)mlir";

// Verify the intervals of a small function: a view shares its source's
// buffer and keeps it live until the view's last read, a returned value
// lives to the end, and the peak is the point with the most bytes live.
TEST_F(ReferenceTest, BufferLivenessIntervalsAndPeak) {
  auto owned = parse(kProgram);
  ASSERT_TRUE(owned) << diagnostics;
  auto fn = owned->lookupSymbol<mlir::func::FuncOp>("f");
  auto l = BufferLiveness::compute(fn, 256);
  ASSERT_TRUE(mlir::succeeded(l)) << diagnostics;
  // %a, %b, %c, %d own buffers (256 bytes each); %r is a view of %a.
  ASSERT_EQ(l->buffers.size(), 4u);
  EXPECT_EQ(l->numPoints, 6);
  auto interval = [&](int i) { return std::make_pair(l->buffers[i].first, l->buffers[i].last); };
  EXPECT_EQ(interval(0), std::make_pair(int64_t{0}, int64_t{4})); // %a, read through %r by the add
  EXPECT_EQ(interval(1), std::make_pair(int64_t{2}, int64_t{3})); // %b
  EXPECT_EQ(interval(2), std::make_pair(int64_t{3}, int64_t{4})); // %c
  EXPECT_EQ(interval(3), std::make_pair(int64_t{4}, int64_t{6})); // %d, returned
  mlir::Value r = fn.getBody().front().getOperations().begin()->getNextNode()->getResult(0);
  EXPECT_EQ(l->homes.lookup(r).buffer, 0);
  for (const LiveBuffer &b : l->buffers)
    EXPECT_EQ(b.size, 256);
  // Points 3 (%a, %b, %c) and 4 (%a, %c, %d) both hold 768 bytes: the first.
  EXPECT_EQ(l->peakBytes, 768);
  EXPECT_EQ(l->peakPoint, 3);
  EXPECT_EQ(l->liveAtPeak, (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(l->argumentBytes(), 256);
  // The placement needs at least the peak; here exactly.
  std::vector<LiveBuffer> buffers = l->buffers;
  EXPECT_EQ(placeBuffers(buffers), 768);
}

// Verify on the tiny train step that the liveness peak is a lower bound of
// the activation pool gpt-plan-memory places (built on the same analysis),
// and that the buffers live at the peak sum to it.
TEST_F(GPT2Test, BufferLivenessBoundsThePlan) {
  ASSERT_TRUE(compile("tiny", Phase::MemoryPlan));
  mlir::func::FuncOp step = function("train_step");
  auto l = BufferLiveness::compute(step, 256);
  ASSERT_TRUE(mlir::succeeded(l)) << diagnostics;
  int64_t planned = step->getAttrOfType<mlir::DictionaryAttr>("gpt.memory_plan")
                        .getAs<mlir::IntegerAttr>("activations")
                        .getInt();
  EXPECT_GT(l->peakBytes, 0);
  EXPECT_LE(l->peakBytes, planned);
  int64_t sum = 0;
  for (int i : l->liveAtPeak)
    sum += l->buffers[i].size;
  EXPECT_EQ(sum, l->peakBytes);
  std::vector<LiveBuffer> buffers = l->buffers;
  EXPECT_EQ(placeBuffers(buffers), planned);
}

// Verify that a call is refused with the pass's name: the analysis needs
// one inlined graph.
TEST_F(ReferenceTest, BufferLivenessRefusesCalls) {
  auto owned = parse(R"mlir(
func.func private @g(tensor<4xf32>) -> tensor<4xf32>
func.func @f(%x: tensor<4xf32> {gpt.input = "x"}) -> tensor<4xf32> {
  %y = func.call @g(%x) : (tensor<4xf32>) -> tensor<4xf32>
  return %y : tensor<4xf32>
}
)mlir");
  ASSERT_TRUE(owned) << diagnostics;
  auto fn = owned->lookupSymbol<mlir::func::FuncOp>("f");
  EXPECT_TRUE(mlir::failed(BufferLiveness::compute(fn, 256, "gpt-rematerialize")));
  EXPECT_NE(diagnostics.find("gpt-rematerialize: inline calls first"), std::string::npos)
      << diagnostics;
}

} // namespace

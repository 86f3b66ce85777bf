//===- DataParallelTest.cpp - N simulated ranks train like one big batch ===//
//
// gptc compiles the `tiny` preset twice for the Host target: once for
// kRanks data-parallel ranks of kBatch sequences each (--world-size, small
// all-reduce buckets), once for one device with kRanks * kBatch sequences.
// kRanks Host sessions run in threads, reducing through a HostGroup; each
// gets its slice of the big batch. Losses, grad norms and the final
// parameters must match the single-device run: the mean of the ranks'
// mean gradients is the big batch's mean gradient, up to fp32 rounding.
//
//===----------------------------------------------------------------------===//

#include "TestUtils.h"
#include "e2e/HostTraining.h"

#include "compiler/Codegen/EmitExecutable.h"
#include "runtime/collective/HostCollective.h"
#include "runtime/executor/HostBackend.h"
#include "runtime/executor/OpenSession.h"

#include <cmath>
#include <cstdio>
#include <random>
#include <thread>

using namespace gptc;
using namespace gptc::testing;

namespace {

constexpr int64_t kRanks = 2, kBatch = 2, kSeq = 8, kSteps = 6, kVocab = 60;

struct Trace {
  std::vector<float> loss, norm;
  std::vector<std::vector<uint8_t>> params; // by parameter tensor, after the last step
  std::vector<std::vector<float>> histories; // FP8 amax histories, after the last step
};

class DataParallelTest : public GPT2Test {
protected:
  std::vector<uint8_t> build(int64_t batch, int64_t worldSize,
                             const std::string &precision = "fp32", bool fp8LmHead = false) {
    EXPECT_TRUE(compile("tiny", Phase::MemoryPlan, [&](PipelineOptions &o) {
      o.precision = precision;
      o.fp8LmHead = fp8LmHead;
      o.batch = batch;
      o.seq = kSeq;
      o.lr = 1e-2;
      o.worldSize = worldSize;
      o.bucketMb = 0.004; // several buckets for the tiny model
    }));
    codegen::EmitOptions emit;
    emit.target = codegen::EmitOptions::Target::Host;
    auto bytes = codegen::emitExecutable(*module, emit);
    EXPECT_TRUE(mlir::succeeded(bytes)) << diagnostics;
    return mlir::succeeded(bytes) ? *bytes : std::vector<uint8_t>{};
  }

  /// Tokens of step `step`, all kRanks * kBatch sequences (+1 for targets):
  /// one fixed random batch, so that the loss visibly falls.
  static std::vector<int32_t> batchOf(int64_t) {
    std::mt19937 rng(100);
    std::vector<int32_t> t(kRanks * kBatch * kSeq + 1);
    for (int32_t &x : t)
      x = static_cast<int32_t>(rng() % kVocab);
    return t;
  }

  /// Trains kSteps on sequences [first, first + batch) of each step's batch;
  /// the error, if any, in `error`.
  static Trace train(const std::vector<uint8_t> &bytes, int64_t first, int64_t batch,
                     Collective *collective, std::string &error) {
    Trace trace;
    auto fail = [&](const Status &s) {
      error = s.message();
      return trace;
    };
    auto exe = Executable::loadBytes(bytes, "tiny-host.fb");
    if (!exe)
      return fail(exe.status());
    SessionOptions options;
    options.collective = collective;
    auto session = createSession(std::move(*exe), options);
    if (!session)
      return fail(session.status());
    Session &s = **session;
    std::vector<int32_t> seed = {7};
    if (Status st = s.setInput("init", "seed", seed); !st)
      return fail(st);
    if (Status st = s.run("init"); !st)
      return fail(st);
    if (Status st = s.zeroTensors(schema::TensorRole::OptimizerState); !st)
      return fail(st);
    for (int64_t step = 0; step < kSteps; ++step) {
      std::vector<int32_t> all = batchOf(step);
      // Sequence b of the big batch is all[b*T, (b+1)*T), its targets
      // shifted by one token, as the data loader lays them out.
      std::vector<int32_t> in(all.begin() + first * kSeq, all.begin() + (first + batch) * kSeq);
      std::vector<int32_t> tgt(all.begin() + first * kSeq + 1,
                               all.begin() + (first + batch) * kSeq + 1);
      std::vector<int32_t> stepIn = {static_cast<int32_t>(step)};
      std::vector<float> lrScale = {1.0f};
      std::string program = stepProgram(s, step);
      for (Status st : {s.setInput(program, "tokens", in), s.setInput(program, "targets", tgt),
                        s.setInput(program, "step", stepIn),
                        s.setInput(program, "lr_scale", lrScale), s.run(program)})
        if (!st)
          return fail(st);
      auto loss = s.getScalarF32(program, "loss");
      auto norm = s.getScalarF32(program, "grad_norm");
      if (!loss || !norm)
        return fail(loss ? norm.status() : loss.status());
      trace.loss.push_back(*loss);
      trace.norm.push_back(*norm);
    }
    for (uint32_t i = 0; i < s.schema().tensors()->size(); ++i) {
      const schema::Tensor &t = s.tensor(i);
      if (t.role() == schema::TensorRole::Parameter) {
        std::vector<uint8_t> p(t.size_bytes());
        if (Status st = s.readTensor(i, p.data(), p.size()); !st)
          return fail(st);
        trace.params.push_back(std::move(p));
      }
      if (t.role() == schema::TensorRole::OptimizerState &&
          t.name()->str().rfind("fp8.amax_history.", 0) == 0) {
        std::vector<float> h(t.size_bytes() / 4);
        if (Status st = s.readTensor(i, h.data(), t.size_bytes()); !st)
          return fail(st);
        trace.histories.push_back(std::move(h));
      }
    }
    return trace;
  }

  /// Trains `ranked` on kRanks host ranks in threads, rank r on sequences
  /// [r kBatch, (r + 1) kBatch) of each step's batch; their traces in
  /// `traces` (empty after a failure, reported by the test).
  static void trainOnRanks(const std::vector<uint8_t> &ranked, std::vector<Trace> &traces) {
    HostGroup group(kRanks);
    std::vector<std::unique_ptr<Collective>> members;
    for (int r = 0; r < kRanks; ++r)
      members.push_back(group.member(r));
    traces.assign(kRanks, Trace{});
    std::vector<std::string> errors(kRanks);
    std::vector<std::thread> threads;
    for (int r = 0; r < kRanks; ++r)
      threads.emplace_back([&, r] {
        traces[r] = train(ranked, r * kBatch, kBatch, members[r].get(), errors[r]);
        if (!errors[r].empty())
          group.abort();
      });
    for (std::thread &t : threads)
      t.join();
    for (int r = 0; r < kRanks; ++r)
      ASSERT_TRUE(errors[r].empty()) << "rank " << r << ": " << errors[r];
  }
};

TEST_F(DataParallelTest, RanksTrainLikeOneLargeBatch) {
  std::vector<uint8_t> single = build(kRanks * kBatch, 0);
  std::vector<uint8_t> ranked = build(kBatch, kRanks);
  ASSERT_FALSE(single.empty());
  ASSERT_FALSE(ranked.empty());

  std::string error;
  Trace big = train(single, 0, kRanks * kBatch, nullptr, error);
  ASSERT_TRUE(error.empty()) << error;

  std::vector<Trace> traces;
  ASSERT_NO_FATAL_FAILURE(trainOnRanks(ranked, traces));

  // fp32: the big batch sums its token losses in another order than the
  // ranks' means of means. Stated tolerance: 1e-5 relative on the loss and
  // grad norm; 1e-4 absolute (1% of lr) on parameters after kSteps AdamW
  // steps at lr 1e-2: AdamW divides by sqrt(v), so where a gradient is
  // ~0 its rounding noise moves a parameter by a visible fraction of lr.
  for (int r = 0; r < kRanks; ++r) {
    ASSERT_EQ(traces[r].loss.size(), static_cast<size_t>(kSteps));
    for (int64_t i = 0; i < kSteps; ++i) {
      EXPECT_NEAR(traces[r].loss[i], big.loss[i], 1e-5 * big.loss[i]) << "rank " << r << " step " << i;
      EXPECT_NEAR(traces[r].norm[i], big.norm[i], 1e-5 * big.norm[i]) << "rank " << r << " step " << i;
    }
    ASSERT_EQ(traces[r].params.size(), big.params.size());
    double maxDiff = 0;
    for (size_t p = 0; p < big.params.size(); ++p) {
      ASSERT_EQ(traces[r].params[p].size(), big.params[p].size());
      const float *a = reinterpret_cast<const float *>(traces[r].params[p].data());
      const float *b = reinterpret_cast<const float *>(big.params[p].data());
      for (size_t e = 0; e < big.params[p].size() / 4; ++e)
        maxDiff = std::max(maxDiff, std::abs(double(a[e]) - double(b[e])));
    }
    EXPECT_LT(maxDiff, 1e-4) << "rank " << r;
    std::printf("rank %d: max |param - single-device param| = %.3g\n", r, maxDiff);
  }
  // Training happened, and the ranks agree exactly (same reduced values).
  EXPECT_LT(big.loss.back(), big.loss.front());
  EXPECT_EQ(traces[0].params, traces[1].params);
}

// FP8 with delayed scaling: each rank records the amaxes of its own
// batch; the ranks must end every step with the same histories (their
// maximum), hence take the same scales and save the same state. With the
// FP8 LM head too, whose logit gradient each rank writes as codes at the
// scale of its bound (no history; the same on every rank).
TEST_F(DataParallelTest, Fp8RanksShareTheirAmaxHistories) {
  for (bool head : {false, true}) {
    std::vector<uint8_t> ranked = build(kBatch, kRanks, "fp8", head);
    ASSERT_FALSE(ranked.empty());
    // Different sequences per rank, so their activations' amaxes differ.
    std::vector<Trace> traces;
    ASSERT_NO_FATAL_FAILURE(trainOnRanks(ranked, traces));
    ASSERT_FALSE(traces[0].histories.empty());
    EXPECT_EQ(traces[0].histories, traces[1].histories) << "head " << head;
    EXPECT_EQ(traces[0].params, traces[1].params) << "head " << head;
    EXPECT_LT(traces[0].loss.back(), traces[0].loss.front()) << "head " << head;
    // kSteps amaxes were recorded in each history (newest first).
    for (const std::vector<float> &h : traces[0].histories) {
      ASSERT_GT(h.size(), size_t(kSteps));
      for (int64_t i = 0; i < kSteps; ++i)
        EXPECT_GT(h[i], 0.0f);
      EXPECT_EQ(h[kSteps], 0.0f);
    }
  }
}

// Compiled without a world size (gptc's default), the step reduces over
// however many ranks run it: on kRanks it trains like the big batch, as
// the --world-size=kRanks executable does, and on one rank (no collective:
// the all-reduces are skipped) it computes the one-device executable's
// bits. In bf16 too, where the buckets reduce the narrow gradients the
// backward wrote (their widening casts come after the whole backward).
TEST_F(DataParallelTest, AnyWorldSizeExecutableRunsOnAnyNumberOfRanks) {
  for (const char *precision : {"fp32", "bf16"}) {
    std::vector<uint8_t> any = build(kBatch, -1, precision);
    std::vector<uint8_t> pinned = build(kBatch, kRanks, precision);
    std::vector<uint8_t> single = build(kBatch, 0, precision);
    ASSERT_FALSE(any.empty());
    std::string error;
    Trace alone = train(any, 0, kBatch, nullptr, error);
    ASSERT_TRUE(error.empty()) << precision << ": " << error;
    Trace device = train(single, 0, kBatch, nullptr, error);
    ASSERT_TRUE(error.empty()) << precision << ": " << error;
    EXPECT_EQ(alone.loss, device.loss) << precision;
    EXPECT_EQ(alone.norm, device.norm) << precision;
    EXPECT_EQ(alone.params, device.params) << precision;

    std::vector<Trace> anyRanks, pinnedRanks;
    ASSERT_NO_FATAL_FAILURE(trainOnRanks(any, anyRanks));
    ASSERT_NO_FATAL_FAILURE(trainOnRanks(pinned, pinnedRanks));
    EXPECT_EQ(anyRanks[0].loss, pinnedRanks[0].loss) << precision;
    EXPECT_EQ(anyRanks[0].params, pinnedRanks[0].params) << precision;
    EXPECT_EQ(anyRanks[0].params, anyRanks[1].params) << precision;
    EXPECT_LT(anyRanks[0].loss.back(), anyRanks[0].loss.front()) << precision;
  }
}

TEST_F(DataParallelTest, RankedExecutableNeedsMatchingRanks) {
  std::vector<uint8_t> ranked = build(kBatch, kRanks);
  ASSERT_FALSE(ranked.empty());
  // Without a collective it would be one rank of its two.
  std::string error;
  train(ranked, 0, kBatch, nullptr, error);
  EXPECT_NE(error.find("--world-size=2 but runs on 1 rank;"), std::string::npos) << error;
  // A group of another size is refused when the session opens.
  HostGroup three(3);
  auto member = three.member(0);
  error.clear();
  train(ranked, 0, kBatch, member.get(), error);
  EXPECT_NE(error.find("--world-size=2 but runs on 3 ranks"), std::string::npos) << error;
  // A single-device executable must not run as one of several ranks.
  std::vector<uint8_t> single = build(kBatch, 0);
  HostGroup two(2);
  auto other = two.member(0);
  error.clear();
  train(single, 0, kBatch, other.get(), error);
  EXPECT_NE(error.find("compiled for one device"), std::string::npos) << error;
}

} // namespace

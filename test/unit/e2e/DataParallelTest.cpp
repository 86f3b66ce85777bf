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
                             const std::string &precision = "fp32", bool fp8LmHead = false,
                             int64_t zero = 0) {
    EXPECT_TRUE(compile("tiny", Phase::MemoryPlan, [&](CompileOptions &o) {
      o.zero = zero;
      o.precision = *parsePrecision(precision);
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

// ZeRO-1 (gptc --zero=1): each rank reduce-scatters the gradients, updates
// its half of every parameter with its half of the moments and gathers the
// rest. The gradients, moments and updates are the plain step's bits (the
// host collective sums in rank order either way) except through the
// clipping norm, summed in another order (the square root of the ranks'
// squared shard norms): it differs by an ulp or two, and while it clips
// (steps 1-3 here, norm > 1) so does every update's scale. AdamW at lr 1e-2
// turns that into parameter noise where a gradient is ~0 (its update is
// ~lr whatever its size); under FP8 one such difference flipped a gradient
// code at step 6, which moves its norm and a few parameters visibly.
// Measured (tiny, 2 ranks, 6 steps), ZeRO-1 against the plain step:
//   loss: bit-identical in fp32, bf16 and fp8 (every step)
//   norm: 3.3e-7 / 1.1e-7 / 2.8e-5 relative (fp32 / bf16 / fp8)
//   parameters after the last update: 2.4e-5 / 6.0e-8 / 3.7e-3 absolute
// Stated tolerances: twice those (the loss 1e-7 relative: one float ulp).
TEST_F(DataParallelTest, ZeroOneTrainsLikePlainDataParallelism) {
  struct Tolerance {
    const char *precision;
    double norm, params;
  };
  for (auto [precision, normTol, paramTol] :
       {Tolerance{"fp32", 7e-7, 5e-5}, Tolerance{"bf16", 2.2e-7, 1.2e-7},
        Tolerance{"fp8", 5.6e-5, 7.4e-3}}) {
    std::vector<uint8_t> plain = build(kBatch, kRanks, precision);
    std::vector<uint8_t> zero = build(kBatch, kRanks, precision, false, 1);
    ASSERT_FALSE(plain.empty());
    ASSERT_FALSE(zero.empty());
    // The moments are halves: each rank holds 1/kRanks of them.
    auto exe = Executable::loadBytes(zero, "zero.fb");
    ASSERT_TRUE(exe) << exe.status().message();
    int sharded = 0;
    for (const schema::Tensor *t : *(*exe)->tensors())
      if (t->shards()) {
        ++sharded;
        EXPECT_EQ(t->shards(), uint32_t(kRanks)) << t->name()->str();
        EXPECT_EQ(t->role(), schema::TensorRole::OptimizerState) << t->name()->str();
      }
    EXPECT_GT(sharded, 0) << precision;

    std::vector<Trace> a, b;
    ASSERT_NO_FATAL_FAILURE(trainOnRanks(plain, a));
    ASSERT_NO_FATAL_FAILURE(trainOnRanks(zero, b));
    double lossDiff = 0, normDiff = 0, paramDiff = 0;
    for (int r = 0; r < kRanks; ++r) {
      ASSERT_EQ(b[r].loss.size(), a[r].loss.size());
      for (size_t i = 0; i < a[r].loss.size(); ++i) {
        lossDiff = std::max(lossDiff, std::abs(double(b[r].loss[i]) / a[r].loss[i] - 1));
        normDiff = std::max(normDiff, std::abs(double(b[r].norm[i]) / a[r].norm[i] - 1));
      }
      ASSERT_EQ(b[r].params.size(), a[r].params.size());
      for (size_t p = 0; p < a[r].params.size(); ++p) {
        ASSERT_EQ(b[r].params[p].size(), a[r].params[p].size());
        const float *x = reinterpret_cast<const float *>(a[r].params[p].data());
        const float *y = reinterpret_cast<const float *>(b[r].params[p].data());
        for (size_t e = 0; e < a[r].params[p].size() / 4; ++e)
          paramDiff = std::max(paramDiff, std::abs(double(x[e]) - double(y[e])));
      }
    }
    std::printf("%s: ZeRO-1 vs plain: loss %.3g, norm %.3g (relative), params %.3g\n",
                precision, lossDiff, normDiff, paramDiff);
    EXPECT_LE(lossDiff, 1e-7) << precision;
    EXPECT_LE(normDiff, normTol) << precision;
    EXPECT_LE(paramDiff, paramTol) << precision;
    // Every rank gathered the same whole parameters, and training happened.
    EXPECT_EQ(b[0].params, b[1].params) << precision;
    EXPECT_LT(b[0].loss.back(), b[0].loss.front()) << precision;
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

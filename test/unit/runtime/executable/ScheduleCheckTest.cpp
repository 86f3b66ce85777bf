//===- ScheduleCheckTest.cpp - cross-stream races in hand-built programs --===//
//
// Each test writes the schedule the compiler emits for one all-reduce
// (produce on stream 0, record, wait + reduce + record on stream 1, wait,
// consume on stream 0) or a variation of it, then checks that
// checkSchedule and the loader accept the ordered ones and name both
// commands of each race.
//
//===----------------------------------------------------------------------===//

#include "runtime/executable/ScheduleCheck.h"
#include "test/unit/runtime/ExecutableBuilder.h"

#include <gtest/gtest.h>

#include <random>

using namespace gptc;
using namespace gptc::testing;

namespace {

class ScheduleCheckTest : public ::testing::Test {
protected:
  ScheduleCheckTest() {
    e.numStreams = 2;
    e.numEvents = 4;
    pool = e.addPool("activations", 4096);
    other = e.addPool("params", 4096);
    g = e.addTensor("g", s::TensorRole::Activation, s::DType::F32, {16}, pool, 0);  // [0, 64)
    h = e.addTensor("h", s::TensorRole::Activation, s::DType::F32, {16}, pool, 64); // [64, 128)
    out = e.addTensor("out", s::TensorRole::Activation, s::DType::F32, {16}, pool, 256);
    k = e.addKernel("k", 1);
  }

  /// The compiler's all-reduce of g, with h computed meanwhile.
  ProgramSpec &allReduceOfG() {
    ProgramSpec &p = e.addProgram("train_step");
    p.launch(k, {tensorArg(g)});        // 0: produce g
    p.record(0, 0);                     // 1
    p.wait(0, 1);                       // 2
    p.allReduce({g}).commands.back().stream = 1; // 3
    p.record(1, 1);                     // 4
    p.launch(k, {tensorArg(h)});        // 5: overlaps the all-reduce
    p.wait(1, 0);                       // 6
    p.copy(g, out);                     // 7: reads the reduced g
    return p;
  }

  /// checkSchedule's message, or "" when it passes; the loader must agree.
  std::string check() {
    std::vector<uint8_t> bytes = e.build();
    auto exe = Executable::loadBytes(bytes, "step.fb");
    Status s = checkSchedule(*s::GetExecutable(bytes.data()));
    EXPECT_EQ(bool(exe), bool(s));
    if (!s && !exe)
      EXPECT_EQ(exe.status().message(), "step.fb: " + s.message());
    return s ? "" : s.message();
  }

  static void drop(ProgramSpec &p, size_t command) {
    p.commands.erase(p.commands.begin() + command);
  }

  ExecutableSpec e;
  uint32_t pool, other, g, h, out, k;
};

// Verify that the compiler's two-stream schedule passes.
TEST_F(ScheduleCheckTest, PassesAnOrderedTwoStreamSchedule) {
  allReduceOfG();
  EXPECT_EQ(check(), "");
}

// Verify that a read of the reduced tensor without its wait is a
// read-after-write race, named with both commands, the tensor and the bytes.
TEST_F(ScheduleCheckTest, RejectsAReadWithoutItsWait) {
  drop(allReduceOfG(), 6);
  EXPECT_EQ(check(), "program 'train_step': command 6 (Copy, stream 0) reads tensor 'g' while "
                     "command 3 (AllReduce, stream 1) may still write tensor 'g': they overlap "
                     "in bytes [0, 64) of pool 'activations', and no WaitEvent orders command 6 "
                     "after command 3");
}

// Verify that an all-reduce that does not wait for its input's producer
// is rejected.
TEST_F(ScheduleCheckTest, RejectsAnAllReduceBeforeItsInputIsWritten) {
  drop(allReduceOfG(), 2);
  EXPECT_EQ(check(), "program 'train_step': command 2 (AllReduce, stream 1) writes tensor 'g' "
                     "while command 0 (LaunchKernel, stream 0) may still read or write tensor "
                     "'g': they overlap in bytes [0, 64) of pool 'activations', and no "
                     "WaitEvent orders command 2 after command 0");
}

// Verify write-after-read: stream 1 reads g while stream 0 overwrites it;
// a wait for an event recorded after the read makes it safe.
TEST_F(ScheduleCheckTest, RejectsAnOverwriteOfABufferTheOtherStreamReads) {
  ProgramSpec &p = e.addProgram("train_step");
  p.copy(g, out, 1);  // 0: stream 1 reads g
  p.record(0, 1);     // 1
  p.wait(0, 0);       // 2
  p.memset(g, 0, 0);  // 3: stream 0 overwrites g
  EXPECT_EQ(check(), "");
  drop(p, 2);
  EXPECT_EQ(check(), "program 'train_step': command 2 (Memset, stream 0) writes tensor 'g' while "
                     "command 0 (Copy, stream 1) may still read tensor 'g': they overlap in "
                     "bytes [0, 64) of pool 'activations', and no WaitEvent orders command 2 "
                     "after command 0");
}

// Verify that hazards are between bytes: a different tensor the planner put
// over part of g races the all-reduce; one beside g, or at the same offset
// of another pool, does not.
TEST_F(ScheduleCheckTest, CatchesDifferentTensorsThatShareBytes) {
  uint32_t overlapping =
      e.addTensor("tmp", s::TensorRole::Activation, s::DType::F32, {8}, pool, 32);
  uint32_t beside = e.addTensor("beside", s::TensorRole::Activation, s::DType::F32, {8}, pool, 64);
  uint32_t elsewhere = e.addTensor("w", s::TensorRole::Parameter, s::DType::F32, {8}, other, 0);
  ProgramSpec &p = allReduceOfG();
  p.commands.insert(p.commands.begin() + 5, p.commands[5]); // two launches during the reduce
  p.commands[5].args = {tensorArg(beside)};
  p.commands[6].args = {tensorArg(elsewhere)};
  EXPECT_EQ(check(), "");
  p.commands[6].args = {tensorArg(overlapping)};
  EXPECT_EQ(check(), "program 'train_step': command 6 (LaunchKernel, stream 0) passes tensor "
                     "'tmp' to its kernel (which may write it) while command 3 (AllReduce, "
                     "stream 1) may still write tensor 'g': they overlap in bytes [32, 64) of "
                     "pool 'activations', and no WaitEvent orders command 6 after command 3");
}

// Verify that a wait orders only what its event's most recent record
// follows: an event recorded before the write, or recorded only after the
// wait was enqueued, orders nothing.
TEST_F(ScheduleCheckTest, RejectsAWaitOnAnEventRecordedBeforeTheWrite) {
  ProgramSpec &early = e.addProgram("early");
  early.record(0, 0).launch(k, {tensorArg(g)}).wait(0, 1).allReduce({g});
  early.commands.back().stream = 1;
  EXPECT_NE(check().find("program 'early': command 3 (AllReduce, stream 1) writes tensor 'g' "
                         "while command 1 (LaunchKernel, stream 0)"),
            std::string::npos);

  e.programs.clear();
  ProgramSpec &late = e.addProgram("late");
  late.launch(k, {tensorArg(g)}).wait(0, 1).record(0, 0).allReduce({g});
  late.commands.back().stream = 1;
  EXPECT_NE(check().find("command 3 (AllReduce, stream 1) writes tensor 'g' while command 0"),
            std::string::npos);

  // Recorded again after the write: the wait sees the latest record.
  e.programs.clear();
  ProgramSpec &again = e.addProgram("again");
  again.record(0, 0).launch(k, {tensorArg(g)}).record(0, 0).wait(0, 1).allReduce({g});
  again.commands.back().stream = 1;
  EXPECT_EQ(check(), "");
}

// Verify that one stream never races itself, however its tensors overlap,
// and that concurrent reads are no race.
TEST_F(ScheduleCheckTest, SameStreamAndConcurrentReadsAreFine) {
  uint32_t overlapping =
      e.addTensor("tmp", s::TensorRole::Activation, s::DType::F32, {8}, pool, 32);
  ProgramSpec &p = e.addProgram("train_step");
  p.launch(k, {tensorArg(g)}, 1, 1, 1).memset(overlapping, 0, 1).copy(g, out, 1);
  p.launch(k, {tensorArg(overlapping)}, 1, 1, 1);
  p.launch(k, {tensorArg(h)}).memset(h, 0); // stream 0, bytes of its own
  EXPECT_EQ(check(), "");

  e.programs.clear();
  ProgramSpec &reads = e.addProgram("reads");
  reads.copy(g, out, 0).copy(g, h, 1);
  EXPECT_EQ(check(), "");
}

// Verify that orderings compose: stream 2 reads what stream 0 wrote after
// waiting for stream 1, which waited for stream 0.
TEST_F(ScheduleCheckTest, FollowsChainsOfEvents) {
  e.numStreams = 3;
  ProgramSpec &p = e.addProgram("train_step");
  p.launch(k, {tensorArg(g)}).record(0, 0).wait(0, 1).record(1, 1).wait(1, 2).copy(g, out, 2);
  EXPECT_EQ(check(), "");
  drop(p, 4);
  EXPECT_NE(check().find("command 4 (Copy, stream 2) reads tensor 'g' while command 0 "
                         "(LaunchKernel, stream 0)"),
            std::string::npos);
}

// Verify that a stream's later write covers its earlier reads: the other
// stream must wait for the write, and waiting for it is enough.
TEST_F(ScheduleCheckTest, ALaterWriteOnTheSameStreamCoversEarlierReads) {
  ProgramSpec &p = e.addProgram("train_step");
  p.copy(g, out, 1).memset(g, 0, 1).record(0, 1).wait(0, 0).launch(k, {tensorArg(g)});
  EXPECT_EQ(check(), "");
  drop(p, 3);
  EXPECT_NE(check().find("command 3 (LaunchKernel, stream 0) passes tensor 'g' to its kernel "
                         "(which may write it) while command 1 (Memset, stream 1) may still "
                         "write"),
            std::string::npos);
}

// Verify that a GEMM's bias counts as read for Bias and as written for
// BGradA, racing a read on the other stream only then.
TEST_F(ScheduleCheckTest, GemmEpiloguesDecideWhatIsWritten) {
  GemmSpec bias;
  bias.m = bias.n = bias.k = 4;
  bias.lda = bias.ldb = bias.ldc = 4;
  bias.epilogue = s::Epilogue::Bias;
  uint32_t forward = e.addGemm(bias);
  bias.epilogue = s::Epilogue::BGradA;
  uint32_t backward = e.addGemm(bias);
  uint32_t d = e.addTensor("d", s::TensorRole::Activation, s::DType::F32, {16}, pool, 512);
  ProgramSpec &p = e.addProgram("train_step");
  p.copy(h, out, 1).gemm(forward, g, g, d, /*bias=*/h);
  EXPECT_EQ(check(), "");
  p.commands.back().gemm = backward;
  EXPECT_NE(check().find("command 1 (RunGemm, stream 0) writes tensor 'h' while command 0 "
                         "(Copy, stream 1) may still read tensor 'h'"),
            std::string::npos);
}

// Verify that a program on more streams than the clocks hold is refused,
// not checked in quadratic memory (num_streams comes from the file).
TEST_F(ScheduleCheckTest, RefusesMoreThan64Streams) {
  e.numStreams = 65;
  ProgramSpec &p = e.addProgram("train_step");
  for (uint32_t s = 0; s < 65; ++s)
    p.launch(k, {tensorArg(g)}, 1, 1, s);
  EXPECT_EQ(check(), "program 'train_step' uses 65 streams; the schedule check handles 64");
  p.commands.pop_back();
  EXPECT_NE(check().find("command 1 (LaunchKernel, stream 1) passes tensor 'g'"),
            std::string::npos);
}

// Verify checkSchedule against its definition on random programs: a race
// is two commands on different streams touching overlapping bytes, one
// writing, with no path between them in the graph of stream order and
// record -> wait edges (each wait to its event's latest record before
// it). The checker must fail exactly when one exists, at the first later
// command of any race, naming a command it races.
TEST_F(ScheduleCheckTest, AgreesWithPathsInTheHappensBeforeGraph) {
  e.numStreams = 3;
  e.numEvents = 3;
  e.tensors.clear();
  std::mt19937 rng(41);
  auto pick = [&](uint32_t n) { return uint32_t(rng() % n); };
  for (int i = 0; i < 8; ++i) // 16 bytes each, at random multiples of 4 in 128
    e.addTensor("t" + std::to_string(i), s::TensorRole::Activation, s::DType::F32, {4},
                pick(2) ? pool : other, 4 * pick(29));
  size_t races = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    e.programs.clear();
    ProgramSpec &p = e.addProgram("p");
    uint32_t n = 2 + pick(30);
    for (uint32_t c = 0; c < n; ++c) {
      uint32_t stream = pick(3), t = pick(8);
      switch (pick(8)) {
      case 0:
        p.launch(k, {tensorArg(t)}, 1, 1, stream);
        break;
      case 1:
        p.copy(t, pick(8), stream);
        break;
      case 2:
        p.memset(t, 0, stream);
        break;
      case 3:
      case 4:
        p.record(pick(3), stream);
        break;
      default:
        p.wait(pick(3), stream);
        break;
      }
    }
    // What each command touches: (tensor, writes).
    auto touches = [&](const CommandSpec &c) -> std::vector<std::pair<uint32_t, bool>> {
      switch (c.op) {
      case s::Op::LaunchKernel:
        return {{c.args[0].index, true}};
      case s::Op::Copy:
        return {{c.a, false}, {c.b, true}};
      case s::Op::Memset:
        return {{c.a, true}};
      default:
        return {};
      }
    };
    auto overlap = [&](uint32_t x, uint32_t y) {
      const auto &a = e.tensors[x], &b = e.tensors[y];
      return a.pool == b.pool && a.offset < b.offset + 16 && b.offset < a.offset + 16;
    };
    // reach[a][b]: a path from command a to command b (a < b).
    std::vector<std::vector<bool>> reach(n, std::vector<bool>(n, false));
    for (uint32_t b = 0; b < n; ++b) {
      const CommandSpec &cb = p.commands[b];
      for (uint32_t a = b; a-- > 0;) {
        const CommandSpec &ca = p.commands[a];
        bool edge = ca.stream == cb.stream;
        if (cb.op == s::Op::WaitEvent && ca.op == s::Op::RecordEvent && ca.event == cb.event) {
          bool latest = true;
          for (uint32_t m = a + 1; m < b; ++m)
            latest &= !(p.commands[m].op == s::Op::RecordEvent && p.commands[m].event == cb.event);
          edge |= latest;
        }
        if (edge) {
          reach[a][b] = true;
          for (uint32_t z = 0; z < a; ++z)
            if (reach[z][a])
              reach[z][b] = true;
        }
      }
    }
    auto racy = [&](uint32_t a, uint32_t b) {
      const CommandSpec &ca = p.commands[a], &cb = p.commands[b];
      if (ca.stream == cb.stream || reach[a][b])
        return false;
      for (auto [x, wx] : touches(ca))
        for (auto [y, wy] : touches(cb))
          if ((wx || wy) && overlap(x, y))
            return true;
      return false;
    };
    uint32_t firstLater = n;
    for (uint32_t b = 0; b < n && firstLater == n; ++b)
      for (uint32_t a = 0; a < b; ++a)
        if (racy(a, b))
          firstLater = b;
    std::vector<uint8_t> bytes = e.build();
    Status status = checkSchedule(*s::GetExecutable(bytes.data()));
    SCOPED_TRACE("trial " + std::to_string(trial));
    ASSERT_EQ(bool(status), firstLater == n) << (status ? "" : status.message());
    if (status)
      continue;
    ++races;
    const std::string &m = status.message();
    size_t at = m.find("while command ");
    ASSERT_EQ(m.rfind("program 'p': command ", 0), 0u) << m;
    ASSERT_NE(at, std::string::npos) << m;
    uint32_t later = std::stoul(m.substr(21)), earlier = std::stoul(m.substr(at + 14));
    EXPECT_EQ(later, firstLater) << status.message();
    EXPECT_TRUE(earlier < later && racy(earlier, later)) << status.message();
  }
  EXPECT_GT(races, 500u);
  EXPECT_LT(races, 2900u);
}

} // namespace

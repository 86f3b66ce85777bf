//===- ScheduleCheckTest.cpp - gptc's two-stream schedules, mutated -------===//
//
// gptc compiles `tiny` for two data-parallel ranks: compute on stream 0,
// each gradient bucket's all-reduce on stream 1 between events. The
// compiled schedule must pass checkSchedule; then each WaitEvent is
// dropped from the FlatBuffer in turn, and the loader must refuse every
// executable whose all-reduce no longer waits for its gradients, and the
// one whose compute stream no longer waits for the last all-reduce.
//
//===----------------------------------------------------------------------===//

#include "TestUtils.h"

#include "compiler/Codegen/EmitExecutable.h"
#include "runtime/executable/Executable.h"
#include "runtime/executable/ScheduleCheck.h"

#include <cstring>

using namespace gptc;
using namespace gptc::testing;

namespace {

class ScheduleCheckTest : public GPT2Test,
                          public ::testing::WithParamInterface<std::string> {
protected:
  std::vector<uint8_t> compileTwoRanks(const std::string &precision) {
    EXPECT_TRUE(compile("tiny", Phase::MemoryPlan, [&](CompileOptions &o) {
      o.precision = *parsePrecision(precision);
      o.batch = 2;
      o.seq = 8;
      o.worldSize = 2;
      o.bucketMb = 0.004; // several buckets for the tiny model
    }));
    codegen::EmitOptions emit;
    emit.target = codegen::EmitOptions::Target::Host;
    auto bytes = codegen::emitExecutable(*module, emit);
    EXPECT_TRUE(mlir::succeeded(bytes)) << diagnostics;
    return mlir::succeeded(bytes) ? *bytes : std::vector<uint8_t>{};
  }
};

/// Removes command `index` of program `program` in place and reseals: the
/// commands vector's later offsets move down one slot (each is relative to
/// its own slot, so it grows by 4) and its length shrinks by one.
void dropCommand(std::vector<uint8_t> &bytes, uint32_t program, uint32_t index) {
  const auto *commands =
      schema::GetExecutable(bytes.data())->programs()->Get(program)->commands();
  uint8_t *v = bytes.data() + (reinterpret_cast<const uint8_t *>(commands) - bytes.data());
  uint32_t n = commands->size();
  for (uint32_t i = index; i + 1 < n; ++i) {
    uint32_t offset;
    std::memcpy(&offset, v + 4 + 4 * (i + 1), 4);
    offset += 4;
    std::memcpy(v + 4 + 4 * i, &offset, 4);
  }
  --n;
  std::memcpy(v, &n, 4);
  ASSERT_TRUE(sealExecutable(bytes));
}

// Verify that the compiled schedule passes, and that dropping a wait that
// orders an all-reduce after its gradients, or the compute stream after
// the last all-reduce, gets the executable refused at load.
TEST_P(ScheduleCheckTest, DroppingAWaitIsRefused) {
  std::vector<uint8_t> bytes = compileTwoRanks(GetParam());
  ASSERT_FALSE(bytes.empty());
  const schema::Executable &exe = *schema::GetExecutable(bytes.data());
  ASSERT_EQ(exe.num_streams(), 2u);
  ASSERT_TRUE(checkSchedule(exe)) << checkSchedule(exe).message();
  ASSERT_TRUE(Executable::loadBytes(bytes, "tiny.fb"));

  size_t commWaits = 0, computeWaitsCaught = 0;
  for (uint32_t p = 0; p < exe.programs()->size(); ++p) {
    const auto *commands = exe.programs()->Get(p)->commands();
    // The compute stream's wait for the all-reduce issued last.
    uint32_t lastDone = ~0u, lastDoneWait = ~0u;
    for (const schema::Command *cmd : *commands)
      if (cmd->op_type() == schema::Op::RecordEvent && cmd->stream() == 1)
        lastDone = cmd->op_as_RecordEvent()->event();
    for (uint32_t c = 0; c < commands->size(); ++c) {
      const schema::Command *cmd = commands->Get(c);
      if (cmd->op_type() == schema::Op::WaitEvent && cmd->stream() == 0 &&
          cmd->op_as_WaitEvent()->event() == lastDone)
        lastDoneWait = c;
    }
    for (uint32_t c = 0; c < commands->size(); ++c) {
      const schema::Command *cmd = commands->Get(c);
      if (cmd->op_type() != schema::Op::WaitEvent)
        continue;
      std::vector<uint8_t> mutated = bytes;
      dropCommand(mutated, p, c);
      auto loaded = Executable::loadBytes(mutated, "tiny.fb");
      std::string where = "dropping command " + std::to_string(c) + " (WaitEvent, stream " +
                          std::to_string(cmd->stream()) + ") of program " +
                          exe.programs()->Get(p)->name()->str();
      if (cmd->stream() == 1) {
        ++commWaits;
        ASSERT_FALSE(loaded) << where << " loads";
        EXPECT_NE(loaded.status().message().find(" (AllReduce, stream 1) writes tensor"),
                  std::string::npos)
            << where << ": " << loaded.status().message();
      } else if (!loaded) {
        ++computeWaitsCaught;
        EXPECT_NE(loaded.status().message().find("(AllReduce, stream 1) may still write"),
                  std::string::npos)
            << where << ": " << loaded.status().message();
      } else {
        EXPECT_NE(c, lastDoneWait) << where << " loads";
      }
    }
  }
  EXPECT_GE(commWaits, 2u) << "several buckets";
  EXPECT_GE(computeWaitsCaught, 1u);
}

INSTANTIATE_TEST_SUITE_P(Precisions, ScheduleCheckTest, ::testing::Values("fp32", "bf16"));

} // namespace

//===- Report.h - what a step.fb holds, for people -----------------------===//
//
// `gptc explain step.fb` and `gptc compile --report` print this report; it
// reads only the FlatBuffer (no MLIR), so the runtime tools can print it
// too. Every number comes from the executable: what the schema does not
// record (fusion decisions; the precision policy of older executables) is
// reported as not recorded, never guessed.
//
//===----------------------------------------------------------------------===//

#ifndef GPTC_RUNTIME_EXECUTABLE_REPORT_H
#define GPTC_RUNTIME_EXECUTABLE_REPORT_H

#include "runtime/executable/Executable.h"

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace gptc {

/// The command counts of one program.
struct ProgramSummary {
  std::string name;
  uint64_t commands = 0;
  uint64_t launches = 0;    // LaunchKernel
  uint64_t gemms = 0;       // RunGemm
  /// RunGemms per epilogue (its schema name), by name; None included.
  std::map<std::string, uint64_t> gemmsByEpilogue;
  uint64_t collectives = 0; // AllReduce, ReduceScatter, AllGather
  uint64_t events = 0;      // RecordEvent + WaitEvent
  uint64_t memsets = 0, copies = 0;
  uint64_t distinctKernels = 0; // distinct Kernel indices launched
  /// Launches per kernel family (name without its trailing "_<n>"), most
  /// launched first, ties by name.
  std::vector<std::pair<std::string, uint64_t>> launchesByKernel;
  std::string liveAtPeak; // Program.live_at_peak, empty when absent
  /// A rank-3 "tokens" input, (micro-batches, rows, seq): how a train
  /// step splits its batch (gptc --accum-steps, --split-batch); 0 if none.
  int64_t microBatches = 0, microRows = 0, seq = 0;
};

/// Everything the report prints, as numbers (tests compare these).
struct ExecutableSummary {
  uint32_t formatVersion = 0;
  std::string compilerVersion;
  std::string target; // "cuda sm_90", "host x86_64"
  std::string modelName;
  std::vector<std::pair<std::string, int64_t>> config; // in file order
  int64_t numParameters = 0;  // Model.num_parameters
  std::string precision;      // Model.precision, empty when not recorded
  double lossScale = 1;       // the optimizer record's loss_scale
  /// Model.optimizer (lr, schedule, beta1, ...), in file order.
  std::vector<std::pair<std::string, double>> optimizer;
  uint64_t parameterBytes = 0; // Parameter tensors' bytes
  /// Pool name and size_bytes, in file order.
  std::vector<std::pair<std::string, uint64_t>> pools;
  /// Every pool allocated at once: the plan's peak.
  uint64_t totalPoolBytes = 0;
  /// Tensor bytes per TensorRole (index = role value), and tensor counts.
  std::vector<uint64_t> roleBytes, roleTensors;
  /// ZeRO-1: the tensors that are 1/shards slices, and their bytes per rank.
  uint64_t shardedTensors = 0, shardedBytes = 0, shards = 0;
  /// GEMM descriptors per A operand type (DType name -> count).
  std::vector<std::pair<std::string, uint64_t>> gemmOperandTypes;
  uint64_t numKernels = 0, numGemms = 0;
  uint32_t numStreams = 0, numEvents = 0;
  std::vector<ProgramSummary> programs;
  /// The recompute plan (Executable.remat); hasRemat false when absent.
  bool hasRemat = false;
  uint64_t rematBudget = 0, rematValues = 0, rematOps = 0;
  uint64_t rematPeakBefore = 0, rematPeakAfter = 0;
  double rematStepFlops = 0, rematExtraFlops = 0;
};

/// Model.optimizer's "schedule" value: "constant", "cosine", "linear"
/// (gpt.lr_schedule's kinds), or "unknown".
const char *scheduleKindName(double kind);

/// Summarizes a verified executable (Executable::loadFile/loadBytes).
ExecutableSummary summarize(const schema::Executable &exe);

/// The text that `gptc explain` prints; `origin` names the file.
std::string formatReport(const ExecutableSummary &summary, const std::string &origin);

/// "1.5 KiB", "474.8 MiB", "17 B": binary units, one decimal.
std::string formatBytes(uint64_t bytes);

/// Bytes the CUDA backend allocates for `exe`'s pools, alignment padding
/// included (CudaBackend::allocatePools).
uint64_t requiredPoolBytes(const schema::Executable &exe);

/// Refuses to start a run whose pools need more than the device has free:
/// the message gives both numbers, the shortfall and what to recompile.
Status checkMemoryFits(uint64_t requiredBytes, uint64_t freeBytes);

} // namespace gptc

#endif // GPTC_RUNTIME_EXECUTABLE_REPORT_H

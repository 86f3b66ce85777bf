//===- RunLog.h - machine-readable run logs and the progress bar ----------===//
//
// --log-dir DIR gets DIR/log.jsonl (one JSON object per line) and
// DIR/log.csv with the same records: a "train" record per step and a "val"
// record per validation. Floats are printed with 9 significant digits, so
// an F32 loss reads back as the same bits. Both files are appended to, so a
// resumed run continues its log; each run first writes a "run_start" record
// ("resumed": 0 or 1), so a fresh run in the same directory starts a
// separate curve (gptplot draws the earlier ones apart). The run holds
// DIR/log.lock while it writes (a second run is refused, naming the first),
// and a last line torn by a killed run is cut off before appending.
//
//===----------------------------------------------------------------------===//

#ifndef GPTC_TOOLS_GPTRUN_RUNLOG_H
#define GPTC_TOOLS_GPTRUN_RUNLOG_H

#include "runtime/support/DirLock.h"
#include "runtime/support/Status.h"

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>

namespace gptc::gptrun {

struct LogRecord {
  enum class Kind { Train, Val } kind = Kind::Train;
  int64_t step = 0; // steps completed
  double loss = 0;
  // Train records only; a negative value means "not known" (MFU on the
  // host, memory without a GPU) and is left empty.
  double gradNorm = 0, lr = 0, ms = 0, tokPerSec = 0, mfu = -1;
  int64_t memoryBytes = -1;
};

class RunLog {
public:
  /// Creates `dir` if needed, locks it, cuts a torn last line off its
  /// log.jsonl and log.csv, opens them to append and writes "run_start".
  static StatusOr<std::unique_ptr<RunLog>> open(const std::string &dir, bool resumed = false);
  ~RunLog();
  Status write(const LogRecord &record);

  static std::string jsonLine(const LogRecord &record);
  static std::string csvLine(const LogRecord &record);
  static const char *csvHeader();

private:
  RunLog() = default;
  std::string jsonPath, csvPath;
  FILE *json = nullptr, *csv = nullptr;
  std::unique_ptr<DirLock> lock;
};

/// "[=============>                ] 45/100  45% | 0:12 elapsed | ETA 0:15"
/// for `done` of `total` steps; the ETA is the mean time of the steps this
/// run did (those after `first`, which a resumed run starts at) times the
/// steps left.
std::string progressBar(int64_t done, int64_t total, double elapsedSeconds, int64_t first = 0,
                        int width = 30);
/// "0:15", "12:03", "1:02:03".
std::string formatDuration(double seconds);

} // namespace gptc::gptrun

#endif // GPTC_TOOLS_GPTRUN_RUNLOG_H

//===- RunLog.cpp - machine-readable run logs and the progress bar --------===//

#include "tools/gptrun/RunLog.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <ctime>
#include <fcntl.h>
#include <filesystem>
#include <sys/stat.h>
#include <unistd.h>

namespace gptc::gptrun {

namespace {

std::string number(double v) {
  if (!std::isfinite(v))
    return std::isnan(v) ? "NaN" : (v > 0 ? "Infinity" : "-Infinity");
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.9g", v);
  return buf;
}

const char *kindName(LogRecord::Kind k) { return k == LogRecord::Kind::Train ? "train" : "val"; }

/// Cuts `path` back to its last newline: a run killed mid-record leaves a
/// partial line, which the next record would otherwise be glued to. The
/// bytes cut, 0 when the file ends in a newline (or does not exist).
StatusOr<int64_t> cutTornLine(const std::string &path) {
  int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0)
    return int64_t(0);
  struct stat st;
  int64_t size = ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) ? int64_t(st.st_size) : 0;
  int64_t keep = size;
  char buf[4096];
  while (keep > 0) {
    int64_t start = std::max<int64_t>(0, keep - int64_t(sizeof(buf)));
    ssize_t n = ::pread(fd, buf, size_t(keep - start), start);
    if (n != keep - start)
      break;
    int64_t i = n;
    while (i > 0 && buf[i - 1] != '\n')
      --i;
    if (i > 0) {
      keep = start + i;
      break;
    }
    keep = start;
  }
  Status s = Status::ok();
  if (keep < size && ::ftruncate(fd, keep) != 0)
    s = Status::error(path + ": cannot cut the torn last line: " + std::strerror(errno));
  ::close(fd);
  if (!s)
    return s;
  return size - keep;
}

} // namespace

StatusOr<std::unique_ptr<RunLog>> RunLog::open(const std::string &dir, bool resumed) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec)
    return Status::error("--log-dir " + dir + ": " + ec.message());
  std::unique_ptr<RunLog> log(new RunLog());
  log->jsonPath = dir + "/log.jsonl";
  log->csvPath = dir + "/log.csv";
  // Opened first, so that a read-only directory or a directory in the
  // file's place is named as such; nothing is written before the lock.
  log->json = std::fopen(log->jsonPath.c_str(), "a");
  if (!log->json)
    return Status::error("--log-dir " + dir + ": cannot open " + log->jsonPath + ": " +
                         std::strerror(errno));
  log->csv = std::fopen(log->csvPath.c_str(), "a");
  if (!log->csv)
    return Status::error("--log-dir " + dir + ": cannot open " + log->csvPath + ": " +
                         std::strerror(errno));
  StatusOr<std::unique_ptr<DirLock>> lock = DirLock::acquire(dir, "log.lock", "--log-dir " + dir);
  if (!lock)
    return lock.status();
  log->lock = std::move(*lock);
  for (const std::string &path : {log->jsonPath, log->csvPath}) {
    StatusOr<int64_t> cut = cutTornLine(path);
    if (!cut)
      return Status::error("--log-dir " + dir + ": " + cut.status().message());
    if (*cut > 0)
      std::printf("gptrun: %s: cut off a torn last line (%lld bytes) of a killed run\n",
                  path.c_str(), (long long)*cut);
  }
  // The size now, after the cut (the stream's position predates it).
  struct stat st;
  if (::fstat(::fileno(log->csv), &st) == 0 && st.st_size == 0 &&
      (std::fprintf(log->csv, "%s\n", csvHeader()) < 0 || std::fflush(log->csv) != 0))
    return Status::error("--log-dir " + dir + ": cannot write " + log->csvPath + ": " +
                         std::strerror(errno));
  // Where one run ends and the next begins: a fresh run is a new curve.
  char host[256] = "";
  ::gethostname(host, sizeof(host) - 1);
  char since[32] = "";
  std::time_t now = std::time(nullptr);
  std::tm utc;
  if (::gmtime_r(&now, &utc))
    std::strftime(since, sizeof(since), "%Y-%m-%dT%H:%M:%SZ", &utc);
  std::string json = std::string("{\"kind\":\"run_start\",\"resumed\":") + (resumed ? "1" : "0") +
                     ",\"pid\":" + std::to_string(::getpid()) + ",\"host\":\"" + host +
                     "\",\"time\":\"" + since + "\"}\n";
  if (std::fputs(json.c_str(), log->json) < 0 || std::fflush(log->json) != 0 ||
      std::fputs("run_start,,,,,,,,\n", log->csv) < 0 || std::fflush(log->csv) != 0)
    return Status::error("--log-dir " + dir + ": cannot write the log: " + std::strerror(errno));
  return log;
}

RunLog::~RunLog() {
  if (json)
    std::fclose(json);
  if (csv)
    std::fclose(csv);
}

const char *RunLog::csvHeader() {
  return "kind,step,loss,grad_norm,lr,ms,tok_per_s,mfu_percent,memory_bytes";
}

std::string RunLog::jsonLine(const LogRecord &r) {
  std::string s = std::string("{\"kind\":\"") + kindName(r.kind) +
                  "\",\"step\":" + std::to_string(r.step) + ",\"loss\":" + number(r.loss);
  if (r.kind == LogRecord::Kind::Train) {
    s += ",\"grad_norm\":" + number(r.gradNorm) + ",\"lr\":" + number(r.lr) +
         ",\"ms\":" + number(r.ms) + ",\"tok_per_s\":" + number(r.tokPerSec);
    if (r.mfu >= 0)
      s += ",\"mfu_percent\":" + number(r.mfu);
    if (r.memoryBytes >= 0)
      s += ",\"memory_bytes\":" + std::to_string(r.memoryBytes);
  } else {
    s += ",\"ms\":" + number(r.ms);
  }
  return s + "}";
}

std::string RunLog::csvLine(const LogRecord &r) {
  bool train = r.kind == LogRecord::Kind::Train;
  return std::string(kindName(r.kind)) + "," + std::to_string(r.step) + "," + number(r.loss) +
         "," + (train ? number(r.gradNorm) : "") + "," + (train ? number(r.lr) : "") + "," +
         number(r.ms) + "," + (train ? number(r.tokPerSec) : "") + "," +
         (train && r.mfu >= 0 ? number(r.mfu) : "") + "," +
         (train && r.memoryBytes >= 0 ? std::to_string(r.memoryBytes) : "");
}

Status RunLog::write(const LogRecord &r) {
  std::string j = jsonLine(r) + "\n", c = csvLine(r) + "\n";
  // Flushed per record: the log of a run that dies is complete up to then.
  if (std::fputs(j.c_str(), json) < 0 || std::fflush(json) != 0)
    return Status::error(jsonPath + ": write failed: " + std::strerror(errno));
  if (std::fputs(c.c_str(), csv) < 0 || std::fflush(csv) != 0)
    return Status::error(csvPath + ": write failed: " + std::strerror(errno));
  return Status::ok();
}

std::string formatDuration(double seconds) {
  long long s = std::llround(std::max(0.0, seconds));
  char buf[32];
  if (s >= 3600)
    std::snprintf(buf, sizeof(buf), "%lld:%02lld:%02lld", s / 3600, s / 60 % 60, s % 60);
  else
    std::snprintf(buf, sizeof(buf), "%lld:%02lld", s / 60, s % 60);
  return buf;
}

std::string progressBar(int64_t done, int64_t total, double elapsedSeconds, int64_t first,
                        int width) {
  total = std::max<int64_t>(total, 1);
  done = std::min(std::max<int64_t>(done, 0), total);
  int filled = int(width * done / total);
  std::string bar = "[";
  for (int i = 0; i < width; ++i)
    bar += i < filled ? '=' : (i == filled && done < total ? '>' : ' ');
  bar += "]";
  char buf[160];
  std::string eta =
      done > first ? formatDuration(elapsedSeconds / double(done - first) * double(total - done))
                   : "?";
  std::snprintf(buf, sizeof(buf), " %lld/%lld %3d%% | %s elapsed | ETA %s", (long long)done,
                (long long)total, int(100 * done / total), formatDuration(elapsedSeconds).c_str(),
                eta.c_str());
  return bar + buf;
}

} // namespace gptc::gptrun

//===- Trainer.cpp - gptrun's training loop -------------------------------===//

#include "tools/gptrun/Trainer.h"

#include "runtime/checkpoint/Checkpoint.h"
#include "runtime/checkpoint/Gpt2Weights.h"
#include "runtime/data/BatchStage.h"
#include "runtime/data/DataLoader.h"
#include "runtime/device/Device.h"
#include "runtime/executable/Report.h"
#include "runtime/executor/OpenSession.h"
#include "runtime/support/Hash64.h"
#include "tools/gptrun/Signals.h"
#include "tools/gptrun/RunLog.h"
#include "tools/gptrun/Throughput.h"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <filesystem>
#include <map>
#include <optional>
#include <unistd.h>

namespace gptc::gptrun {

namespace {

using Clock = std::chrono::steady_clock;

double secondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

/// A program's token input as the loader fills it: `accum` micro-batches
/// of (rows, seq), row-major.
struct BatchShape {
  int64_t accum = 1, rows = 1, seq = 1;
  int64_t tokens() const { return accum * rows * seq; }
};

std::string shapeText(const BatchShape &s) {
  return "accum_steps=" + std::to_string(s.accum) + " B=" + std::to_string(s.rows) +
         " T=" + std::to_string(s.seq);
}

/// tokens/targets of `program`: I32 inputs of equal shape (B, T), or
/// (accum_steps, B, T) when `allowAccum`.
StatusOr<BatchShape> batchShape(Session &session, const std::string &program, bool allowAccum) {
  BatchShape shape;
  for (const char *name : {"tokens", "targets"}) {
    StatusOr<uint32_t> index = session.findTensor(name, program);
    if (!index)
      return Status::error("program '" + program + "': " + index.status().message());
    const schema::Tensor &t = session.tensor(*index);
    size_t rank = t.shape() ? t.shape()->size() : 0;
    if (t.dtype() != schema::DType::I32 || rank < 2 || rank > (allowAccum ? 3u : 2u))
      return Status::error("program '" + program + "': input " + session.describeTensor(*index) +
                           " should be I32 " + (allowAccum ? "(accum_steps, B, T)" : "(B, T)"));
    BatchShape s;
    s.seq = t.shape()->Get(rank - 1);
    s.rows = t.shape()->Get(rank - 2);
    s.accum = rank == 3 ? t.shape()->Get(0) : 1;
    if (std::string(name) == "targets" &&
        (s.accum != shape.accum || s.rows != shape.rows || s.seq != shape.seq))
      return Status::error("program '" + program + "': tokens and targets differ in shape");
    shape = s;
  }
  return shape;
}

/// Fails unless `program` writes an F32 scalar output `name`.
Status requireScalarOutput(Session &session, const std::string &program, const std::string &name) {
  StatusOr<uint32_t> index = session.findTensor(name, program);
  if (!index)
    return index.status();
  const schema::Tensor &t = session.tensor(*index);
  if (t.role() != schema::TensorRole::Output || t.dtype() != schema::DType::F32 ||
      t.size_bytes() != 4)
    return Status::error("program '" + program + "': " + session.describeTensor(*index) +
                         " should be an F32 scalar output");
  return Status::ok();
}

/// Sets `name` of `program` to one int32 if the program reads it.
Status setScalarI32(Session &session, const std::string &program, const std::string &name,
                    int32_t value) {
  StatusOr<uint32_t> index = session.findTensor(name, program);
  if (!index)
    return Status::ok();
  if (session.tensor(*index).dtype() != schema::DType::I32 ||
      session.tensor(*index).size_bytes() != 4)
    return Status::error("program '" + program + "': input " + session.describeTensor(*index) +
                         " should be an I32 scalar");
  return session.setInput(program, name, &value, 4);
}

bool hasOutput(Session &session, const std::string &program, const std::string &name) {
  StatusOr<const schema::Program *> p = session.program(program);
  if (!p || !(*p)->outputs())
    return false;
  for (uint32_t t : *(*p)->outputs())
    if (const auto *n = session.tensor(t).name(); n && n->str() == name)
      return true;
  return false;
}

/// " in N shards" for a dataset of several files, "" for one.
std::string shardText(const data::Dataset &d) {
  return d.shards().size() > 1 ? " in " + std::to_string(d.shards().size()) + " shards" : "";
}

} // namespace

struct Trainer::Impl {
  Impl(const Options &options, RankContext r) : o(options), rank(std::move(r)) {}

  Options o;
  RankContext rank;
  std::unique_ptr<Session> session;
  std::map<std::string, int64_t> config;
  BatchShape train, val;
  std::optional<data::DataLoader> trainData, valData;
  double flopsPerTok = 0, peak = 0; // peak 0: no MFU
  bool hasLr = false;
  float lrScale = 1.0f; // train_step's lr_scale input: gptrun --lr over the compiled lr
  /// --schedule: the run-time schedule's kind (0 constant, 1 cosine, 2
  /// linear, as gpt.lr_schedule's), -1 when the compiled one runs; then
  /// each step's lr_scale is its lr over the compiled constant lr.
  int runKind = -1;
  double runPeak = 0, runMin = 0, compiledLr = 0;
  int64_t runWarmup = 0, runTotal = 0;
  /// The lr_scale of 0-based `step`: gpt.lr_schedule's formula at run time.
  float scaleAt(int64_t step) const {
    if (runKind < 0)
      return lrScale;
    double lr = runPeak;
    if (runKind != 0) {
      if (step < runWarmup) {
        lr = runPeak * double(step + 1) / double(runWarmup);
      } else {
        double r = runTotal > runWarmup ? double(step - runWarmup) / double(runTotal - runWarmup)
                                        : 1.0;
        r = std::min(1.0, std::max(0.0, r));
        lr = runKind == 1 ? runMin + 0.5 * (1.0 + std::cos(M_PI * r)) * (runPeak - runMin)
                          : runPeak - r * (runPeak - runMin);
      }
    }
    return static_cast<float>(lr / compiledLr);
  }
  /// What the checkpoint records and a resume compares: the compiled
  /// settings, --lr applied, or the run-time schedule's.
  std::vector<checkpoint::Setting> scheduleSettings() const {
    std::vector<checkpoint::Setting> s = checkpoint::optimizerSettings(session->schema(), lrScale);
    if (runKind < 0)
      return s;
    for (checkpoint::Setting &e : s) {
      if (e.key == "schedule")
        e.value = runKind;
      else if (e.key == "lr")
        e.value = runPeak;
      else if (e.key == "min_lr")
        e.value = runMin;
      else if (e.key == "warmup_steps")
        e.value = double(runWarmup);
      else if (e.key == "total_steps")
        e.value = double(runTotal);
    }
    return s;
  }
  int64_t stepsDone = 0; // restored ones included
  uint64_t dataPosition = 0; // the loader's position after step stepsDone
  uint64_t dataHash = 0;     // Dataset::identity() of the training data, kept in checkpoints
  std::vector<StepRecord> history;
  std::optional<checkpoint::Checkpoint> resumeFrom;
  std::string resumePath;
  std::string lastCheckpoint; // written or resumed from, "" if none
  std::atomic<bool> stopRequested{false};
  std::unique_ptr<RunLog> log;
  std::unique_ptr<DirLock> checkpointLock; // held while this run owns --checkpoint-dir
  bool drawBar = false;   // stdout is a terminal: keep a progress bar below the lines
  bool barShown = false;  // the bar is on the last line now

  // The step loop's queue: at most two steps in flight, each with its
  // batch slot and its half of `io` (scalar inputs and read-back outputs,
  // in host memory the device copies to and from).
  struct StepIo {
    int32_t step;
    float lrScale, loss, gradNorm, lr;
  };
  struct InFlight {
    int64_t step; // 0-based
    int slot;     // the batch's slot in `stage`
    uint64_t dataPosition;
    Backend::Fence start, fence; // before the step's inputs, after its outputs
  };
  struct TrainTensors {
    uint32_t tokens, targets, loss, gradNorm;
    int64_t step = -1, lrScale = -1, lr = -1; // -1: the program has none
  };
  TrainTensors io;
  // gpt-fp8-steady-step's @train_step_first and its tensors: it runs the
  // first step from @init (empty FP8 histories), @train_step every other.
  TrainTensors firstIo;
  bool firstPending = false; // the next step enqueued runs @train_step_first
  int64_t firstRanAt = -1;   // the step that ran it
  StepIo *stepIo = nullptr; // two, from backend().allocateHost
  std::deque<InFlight> inFlight;
  std::unique_ptr<data::BatchStage> stage; // reads trainData: destroyed first

  /// Rank 0 speaks for all ranks.
  bool lead() const { return rank.rank == 0; }
  /// ZeRO-1: every rank takes part in capturing a checkpoint (the moments'
  /// shards are gathered), rank 0 writes it.
  bool gathersState = false;
  /// printf on rank 0 only.
  template <typename... Args> void print(const char *format, Args... args) {
    if (lead())
      std::printf(format, args...);
  }
  /// Prints a line of output above the progress bar.
  void say(const std::string &line) {
    if (!lead())
      return;
    if (barShown)
      std::fputs("\r\033[K", stdout);
    barShown = false;
    std::fputs(line.c_str(), stdout);
    std::fflush(stdout);
  }
  /// Memory in use: the GPU's (all processes), or the pools' total on the host.
  int64_t memoryInUse() {
    if (session->backend().kind() == schema::TargetKind::CUDA) {
      StatusOr<device::MemoryInfo> m = device::memoryInfo();
      return m ? int64_t(m->usedBytes()) : -1;
    }
    int64_t total = 0;
    for (const Session::PoolUsage &p : session->pools())
      total += int64_t(p.bytes);
    return total;
  }

  /// Tokens one data loader position covers, over all ranks.
  uint64_t dataStepTokens() const { return uint64_t(train.rows * train.seq * rank.worldSize); }

  int64_t cfg(const std::string &key, int64_t fallback) const {
    auto it = config.find(key);
    return it == config.end() ? fallback : it->second;
  }

  Status setUp();
  Status setUpSchedule();
  Status setUpCheckpoints();
  Status startState();
  Status checkConfig() const;
  Status validate(int64_t step);
  Status run();
  Status runSteps(float lrScale);
  Status findTrainTensors();
  Status enqueueStep(int64_t step, float lrScale);
  /// Waits for every step in flight and frees the step loop's host memory.
  Status drain();
  Status onNonFinite(int64_t step, float loss, float norm, const std::string &cause,
                     const std::optional<checkpoint::Checkpoint> &good);
  /// "stopped (--on-nan=stop), the last good checkpoint is X" (every one
  /// written is finite: checkpoint::writeCheckpoint refuses others).
  std::string stoppedText() const {
    return "stopped (--on-nan=stop), " + (lastCheckpoint.empty()
                                              ? std::string("no checkpoint written")
                                              : "the last good checkpoint is " + lastCheckpoint);
  }
  Status writeCheckpoint(const std::string &path);
  StatusOr<std::string> checkpointNow();
};

Status Trainer::Impl::setUp() {
  SessionOptions so;
  if (o.target)
    so.target = *o.target == "host" ? schema::TargetKind::Host : schema::TargetKind::CUDA;
  so.cuda.device = rank.device >= 0 ? rank.device : o.device;
  so.cuda.graphs = o.graph;
  so.cuda.gemmAutotune = o.gemmAutotune;
  so.cuda.gemmAlgos = o.gemmAlgos;
  so.cuda.programmaticLaunch = o.programmaticLaunch;
  so.collective = rank.collective;
  StatusOr<std::unique_ptr<Session>> s = openSession(o.executable, so);
  if (!s)
    return s.status();
  session = std::move(*s);
  if (const auto *tensors = session->schema().tensors())
    for (const schema::Tensor *t : *tensors)
      gathersState |= t->shards() > 0;
  const schema::Executable &exe = session->schema();
  if (exe.model()->config())
    for (const schema::KeyValue *kv : *exe.model()->config())
      if (kv->key())
        config[kv->key()->str()] = kv->value();
  if (o.graphGiven && session->backend().kind() != schema::TargetKind::CUDA)
    return Status::error(std::string(o.graph ? "--graph" : "--no-graph") +
                         " applies to the CUDA target only");
  if (Status st = checkDeviceFlag(o, session->backend().kind() == schema::TargetKind::CUDA); !st)
    return st;

  for (const char *p : {"init", "train_step"})
    if (StatusOr<const schema::Program *> prog = session->program(p); !prog)
      return Status::error(o.executable + ": " + prog.status().message());
  StatusOr<BatchShape> shape = batchShape(*session, "train_step", true);
  if (!shape)
    return Status::error(o.executable + ": " + shape.status().message());
  train = *shape;
  if (Status st = checkConfig(); !st)
    return Status::error(o.executable + ": " + st.message());
  hasLr = hasOutput(*session, "train_step", "lr");
  // Checked now rather than after the first step (or the last, for forward).
  for (const char *out : {"loss", "grad_norm", "lr"})
    if (std::string(out) != "lr" || hasLr)
      if (Status st = requireScalarOutput(*session, "train_step", out); !st)
        return Status::error(o.executable + ": " + st.message());

  int64_t vocab = cfg("vocab_size", 0);
  data::DataLoaderOptions shard{train.rows, train.seq};
  shard.rank = rank.rank;
  shard.worldSize = rank.worldSize;
  StatusOr<data::DataLoader> loader = data::DataLoader::open(o.data, shard, vocab);
  if (!loader)
    return loader.status();
  trainData.emplace(std::move(*loader));
  // The data's identity is for checkpoints only: a file's hash costs ~0.3 s
  // per GB, a set of shards' is cheap (Dataset::identity).
  if (!o.checkpointDir.empty() || !o.resume.empty())
    dataHash = trainData->dataset().identity();
  if (!o.val.empty() && lead()) {
    if (StatusOr<const schema::Program *> prog = session->program("forward"); !prog)
      return Status::error(o.executable +
                           ": --val needs program 'forward': " + prog.status().message());
    StatusOr<BatchShape> vshape = batchShape(*session, "forward", false);
    if (!vshape)
      return Status::error(o.executable + ": " + vshape.status().message());
    val = *vshape;
    if (Status st = requireScalarOutput(*session, "forward", "loss"); !st)
      return Status::error(o.executable + ": --val: " + st.message());
    StatusOr<data::DataLoader> vloader = data::DataLoader::open(o.val, {val.rows, val.seq}, vocab);
    if (!vloader)
      return vloader.status();
    valData.emplace(std::move(*vloader));
  }

  int64_t params = exe.model()->num_parameters();
  if (params <= 0 && exe.tensors())
    for (const schema::Tensor *t : *exe.tensors())
      if (t->role() == schema::TensorRole::Parameter)
        params += int64_t(t->size_bytes() / elementSize(t->dtype()));
  flopsPerTok = flopsPerToken(params, cfg("n_layer", 0), train.seq, cfg("n_embd", 0));
  if (session->backend().kind() == schema::TargetKind::CUDA)
    peak = o.peakTflops > 0 ? o.peakTflops : peakTflops(session->backend().deviceName());
  peak *= rank.worldSize; // the ranks' tokens against all their GPUs

  std::string model = exe.model()->name() ? exe.model()->name()->str() : "?";
  print("gptrun: %s: model %s, %s parameters, %s (%s tokens/step)\n", o.executable.c_str(),
        model.c_str(), withCommas(params).c_str(), shapeText(train).c_str(),
        withCommas(train.tokens() * rank.worldSize).c_str());
  if (rank.worldSize > 1 || rank.collective)
    print("gptrun: %d data-parallel rank%s, each with %s%s\n", rank.worldSize,
          rank.worldSize == 1 ? "" : "s", shapeText(train).c_str(),
          (gathersState ? " and 1/" + std::to_string(rank.worldSize) +
                              " of the AdamW state (ZeRO-1)"
                        : std::string())
              .c_str());
  print("gptrun: target %s on %s%s; pools: %s\n",
        session->backend().kind() == schema::TargetKind::CUDA ? "cuda" : "host",
        session->backend().deviceName().c_str(),
        o.graph && session->backend().kind() == schema::TargetKind::CUDA ? ", CUDA graphs" : "",
        session->poolReport().c_str());
  print("gptrun: %s: %s tokens%s, %s steps per epoch\n", o.data.c_str(),
        withCommas(int64_t(trainData->tokenCount())).c_str(),
        shardText(trainData->dataset()).c_str(),
        withCommas(trainData->stepsPerEpoch() / train.accum).c_str());
  if (valData)
    print("gptrun: %s: %s tokens, %s batches of B=%lld T=%lld\n", o.val.c_str(),
          withCommas(int64_t(valData->tokenCount())).c_str(),
          withCommas(valData->stepsPerEpoch()).c_str(), (long long)val.rows, (long long)val.seq);
  if (valData && o.valBatches > valData->stepsPerEpoch())
    print("gptrun: --val-batches %lld: %s has %lld, each validation uses them all\n",
          (long long)o.valBatches, o.val.c_str(), (long long)valData->stepsPerEpoch());
  if (session->backend().kind() == schema::TargetKind::CUDA && peak == 0)
    print("gptrun: no peak FLOP/s known for %s; give --peak-tflops for MFU\n",
          session->backend().deviceName().c_str());
  std::fflush(stdout);
  // The log first: the default checkpoint dir lies inside it, and a bad
  // --log-dir should be named as such. Both fail here, before training.
  if (!o.logDir.empty() && lead()) {
    StatusOr<std::unique_ptr<RunLog>> l = RunLog::open(o.logDir, !o.resume.empty());
    if (!l)
      return l.status();
    log = std::move(*l);
  }
  if (Status st = setUpSchedule(); !st)
    return st;
  if (Status st = setUpCheckpoints(); !st)
    return st;
  drawBar = o.progress && lead() && ::isatty(::fileno(stdout));
  return startState();
}

/// --lr's scale of the compiled schedule, and a warning when --steps runs
/// past the schedule's decay.
Status Trainer::Impl::setUpSchedule() {
  const schema::Executable &exe = session->schema();
  if (o.lr > 0) {
    double compiled = optimizerSetting(exe, "lr", 0);
    if (!session->findTensor("lr_scale", "train_step") || compiled <= 0)
      return Status::error(o.executable + ": --lr needs an executable whose train_step takes "
                           "lr_scale (recompile with this gptc)");
    lrScale = static_cast<float>(o.lr / compiled);
    print("gptrun: --lr %.3g: the compiled schedule (peak %.3g) scaled by %.4g\n", o.lr, compiled,
          lrScale);
  }
  if (!o.schedule.empty()) {
    // The step computes lr = schedule(step) * lr_scale: over a constant
    // compiled schedule, lr_scale alone can follow any other.
    compiledLr = optimizerSetting(exe, "lr", 0);
    if (!session->findTensor("lr_scale", "train_step") || compiledLr <= 0)
      return Status::error(o.executable + ": --schedule needs an executable whose train_step "
                           "takes lr_scale (recompile with this gptc)");
    if (optimizerSetting(exe, "schedule", 0) != 0 || optimizerSetting(exe, "warmup_steps", 0) != 0)
      return Status::error("--schedule: " + o.executable + " was compiled with a " +
                           scheduleKindName(optimizerSetting(exe, "schedule", 0)) +
                           " schedule and warm-up; a run-time schedule needs gptc's default "
                           "(constant, no --warmup-steps)");
    runKind = o.schedule == "cosine" ? 1 : o.schedule == "linear" ? 2 : 0;
    runPeak = o.lr > 0 ? o.lr : compiledLr;
    runMin = o.minLr >= 0 ? o.minLr : 0.0;
    runWarmup = o.warmupSteps;
    runTotal = o.totalSteps ? o.totalSteps : o.steps;
    if (runKind != 0 && runMin > runPeak)
      return Status::error("--min-lr " + std::to_string(runMin) + " exceeds the peak lr " +
                           std::to_string(runPeak));
    print("gptrun: schedule %s, lr %.3g after %lld warm-up steps to %.3g at step %lld (set at "
          "run time over the compiled constant %.3g)\n",
          o.schedule.c_str(), runPeak, (long long)runWarmup, runKind ? runMin : runPeak,
          (long long)runTotal, compiledLr);
    return Status::ok();
  }
  // A decaying schedule stops at --total-steps; the steps after it train at
  // min_lr, which is rarely what a longer --steps meant.
  double kind = optimizerSetting(exe, "schedule", 0);
  double total = optimizerSetting(exe, "total_steps", 0);
  if (kind != 0 && total > 0 && double(o.steps) > total)
    print("gptrun: warning: --steps %lld runs past the executable's --total-steps %lld: its %s "
          "schedule reaches min_lr %.3g there, and steps %lld-%lld train at it (recompile with "
          "gptc --total-steps=%lld to decay over the whole run)\n",
          (long long)o.steps, (long long)total, scheduleKindName(kind),
          optimizerSetting(exe, "min_lr", 0) * lrScale, (long long)total + 1, (long long)o.steps,
          (long long)o.steps);
  return Status::ok();
}

Status Trainer::Impl::setUpCheckpoints() {
  // --no-checkpoint: --log-dir's checkpoints are only where --resume latest
  // looks, and nothing is written.
  if (o.noCheckpoint) {
    if (!o.resume.empty()) {
      StatusOr<std::string> path = gptrun::resumePath(o);
      if (!path)
        return path.status();
      o.resume = *path;
    }
    o.checkpointDir.clear();
  }
  if (!o.checkpointDir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(o.checkpointDir, ec);
    if (ec)
      return Status::error("--checkpoint-dir " + o.checkpointDir + ": " + ec.message());
    // Fail now, not after hours of training at the first checkpoint.
    std::string probe = o.checkpointDir + "/.gptrun-write-test-XXXXXX";
    int fd = ::mkstemp(probe.data());
    if (fd < 0)
      return Status::error("--checkpoint-dir " + o.checkpointDir +
                           ": not writable: " + std::error_code(errno, std::generic_category()).message());
    ::close(fd);
    ::unlink(probe.c_str());
    // One run writes a directory: two would overwrite each other's steps.
    // Holding the lock, any temporary left is a killed run's: removed.
    if (lead()) {
      StatusOr<std::unique_ptr<DirLock>> lock =
          DirLock::acquire(o.checkpointDir, "checkpoints.lock", "--checkpoint-dir " + o.checkpointDir);
      if (!lock)
        return lock.status();
      checkpointLock = std::move(*lock);
      StatusOr<checkpoint::Removed> removed = checkpoint::removeTemporaries(o.checkpointDir);
      if (!removed)
        return removed.status();
      if (removed->files)
        print("gptrun: %s: removed %lld temporary file(s) of interrupted checkpoint writes (%s)\n",
              o.checkpointDir.c_str(), (long long)removed->files,
              formatBytes(removed->bytes).c_str());
    }
  }
  if (o.resume.empty()) {
    // A fresh run would overwrite another run's step-N.ckpt files and mix
    // the two in `--resume latest`.
    if (o.checkpointDir.empty())
      return Status::ok();
    StatusOr<std::vector<checkpoint::Entry>> earlier = checkpoint::list(o.checkpointDir);
    if (!earlier)
      return earlier.status();
    // --log-dir's default directory is named as such.
    bool fromLog = !o.logDir.empty() && o.checkpointDir == o.logDir + "/checkpoints";
    if (!earlier->empty())
      return Status::error((fromLog ? "--log-dir " + o.logDir + ": " + o.checkpointDir
                                    : "--checkpoint-dir " + o.checkpointDir) +
                           " already holds " + std::to_string(earlier->size()) +
                           " checkpoint(s) of an earlier run (newest: " + earlier->back().path +
                           "): continue it with --resume latest, or give a new or empty " +
                           (fromLog ? "--log-dir (or --no-checkpoint)" : "directory"));
    return Status::ok();
  }
  StatusOr<std::string> path = gptrun::resumePath(o);
  if (!path)
    return path.status();
  resumePath = *path;
  StatusOr<checkpoint::Checkpoint> ckpt = checkpoint::readCheckpoint(resumePath);
  if (!ckpt)
    return Status::error("--resume: " + ckpt.status().message());
  if (ckpt->step >= o.steps)
    return Status::error("--resume: " + resumePath + " is at step " + std::to_string(ckpt->step) +
                         ", not before --steps " + std::to_string(o.steps) +
                         "; raise --steps to train further");
  // Another schedule would silently change the run (format < 3 files did
  // not record theirs). --init-from starts anew and is not checked.
  std::vector<checkpoint::Setting> now = scheduleSettings();
  if (std::string diff = checkpoint::scheduleDifference(ckpt->optimizer, now); !diff.empty()) {
    char lrFlag[48] = "";
    if (o.lr > 0)
      std::snprintf(lrFlag, sizeof(lrFlag), " with --lr %g", o.lr);
    if (!o.newSchedule)
      return Status::error("--resume: " + resumePath + " was trained with " +
                           checkpoint::describeSettings(ckpt->optimizer) + ", but " +
                           o.executable + lrFlag + " has " + checkpoint::describeSettings(now) +
                           " (" + diff + "): recompile with the checkpoint's settings, or pass "
                           "--new-schedule to go on under the executable's");
    print("gptrun: --new-schedule: %s goes on under %s's schedule (%s)\n", resumePath.c_str(),
          o.executable.c_str(), diff.c_str());
  }
  // Checkpoints of gptc before the finiteness check may hold a NaN.
  if (Status s = checkpoint::checkFinite(*ckpt); !s)
    return Status::error("--resume: " + resumePath + ": " + s.message() +
                         ": resume from an earlier checkpoint");
  resumeFrom.emplace(std::move(*ckpt));
  lastCheckpoint = resumePath;
  return Status::ok();
}

/// init, or the resumed checkpoint's parameters and state.
Status Trainer::Impl::startState() {
  if (resumeFrom) {
    const checkpoint::Checkpoint &c = *resumeFrom;
    if (Status s = checkpoint::restore(*session, c, resumePath); !s)
      return s;
    stepsDone = c.step;
    // Another B, T or rank count reads other windows: go on at the window
    // holding the next unread token.
    uint64_t position = c.dataPosition, stepTokens = dataStepTokens();
    if (c.dataStepTokens && c.dataStepTokens != stepTokens) {
      position = uint64_t((unsigned __int128)c.dataPosition * c.dataStepTokens / stepTokens);
      print("gptrun: %s read %llu tokens a data step, this run reads %llu: data position %llu "
            "becomes %llu\n",
            resumePath.c_str(), (unsigned long long)c.dataStepTokens,
            (unsigned long long)stepTokens, (unsigned long long)c.dataPosition,
            (unsigned long long)position);
    }
    trainData->seek(position);
    dataPosition = position;
    // Format 1 checkpoints (0 tokens) did not record their data.
    if (c.dataTokens && (c.dataTokens != trainData->tokenCount() || c.dataHash != dataHash))
      print("gptrun: warning: --data %s (%s tokens) is not the data %s was trained on (%s "
            "tokens): training goes on, but not as the uninterrupted run would\n",
            o.data.c_str(), withCommas(int64_t(trainData->tokenCount())).c_str(),
            resumePath.c_str(), withCommas(int64_t(c.dataTokens)).c_str());
    if (c.seed != o.seed)
      print("gptrun: --seed %llu ignored: the checkpoint's init seed was %llu\n",
            (unsigned long long)o.seed, (unsigned long long)c.seed);
    o.seed = c.seed;
    print("gptrun: resumed from %s at step %lld (data position %llu)\n", resumePath.c_str(),
          (long long)c.step, (unsigned long long)c.dataPosition);
    resumeFrom.reset(); // the tensors' bytes are in the session now
    std::fflush(stdout);
    return Status::ok();
  }
  if (Status s = session->zeroTensors(schema::TensorRole::OptimizerState); !s)
    return s;
  // The same seed mapping as gptc run-reference, so both start equal.
  if (Status s = setScalarI32(*session, "init", "seed", int32_t(o.seed % (1u << 24))); !s)
    return s;
  Clock::time_point initStart = Clock::now();
  if (Status s = session->run("init"); !s)
    return s;
  print("gptrun: init in %.1f ms\n", secondsSince(initStart) * 1e3);
  // After @init, so that anything it sets besides the parameters is set.
  if (!o.initFrom.empty()) {
    if (Status s = gpt2::initFrom(*session, o.initFrom); !s)
      return s;
    print("gptrun: parameters from %s (step 0, zero optimizer state)\n", o.initFrom.c_str());
  }
  std::fflush(stdout);
  return Status::ok();
}

Status Trainer::Impl::writeCheckpoint(const std::string &path) {
  StatusOr<checkpoint::Checkpoint> c = checkpoint::capture(*session);
  if (!c)
    return c.status();
  if (!lead())
    return Status::ok(); // it gathered its ZeRO-1 shards for rank 0
  c->step = stepsDone;
  c->dataPosition = dataPosition;
  c->seed = o.seed;
  c->dataSeed = trainData->options().seed;
  c->dataTokens = trainData->tokenCount();
  c->dataHash = dataHash;
  c->dataStepTokens = dataStepTokens();
  c->optimizer = scheduleSettings();
  // A finite loss and norm do not make the update finite (a huge lr):
  // such a state is never written, and the run stops with a resumable one.
  if (Status s = checkpoint::checkFinite(*c); !s)
    return Status::error("step " + std::to_string(stepsDone) + ": " + s.message() +
                         " after the update; " + path + " is not written; " + stoppedText());
  return checkpoint::writeCheckpoint(path, *c);
}

StatusOr<std::string> Trainer::Impl::checkpointNow() {
  if (o.checkpointDir.empty())
    return Status::error("no checkpoint directory (give --checkpoint-dir or --log-dir)");
  std::string path = o.checkpointDir + "/" + checkpoint::fileName(stepsDone);
  Clock::time_point start = Clock::now();
  if (Status s = writeCheckpoint(path); !s)
    return s;
  lastCheckpoint = path;
  if (!lead())
    return path;
  if (o.keepCheckpoints > 0)
    if (Status s = checkpoint::prune(o.checkpointDir, o.keepCheckpoints, stepsDone); !s)
      return s;
  char ms[32];
  std::snprintf(ms, sizeof(ms), "%.1f", secondsSince(start) * 1e3);
  say("gptrun: checkpoint " + path + " (" + ms + " ms)\n");
  return path;
}

Status Trainer::Impl::checkConfig() const {
  struct Key {
    const char *name;
    int64_t actual;
  };
  for (Key k : {Key{"batch", train.rows}, Key{"seq", train.seq}, Key{"accum_steps", train.accum}})
    if (auto it = config.find(k.name); it != config.end() && it->second != k.actual)
      return Status::error("model config says " + std::string(k.name) + "=" +
                           std::to_string(it->second) + " but train_step's tokens are " +
                           shapeText(train));
  return Status::ok();
}

Status Trainer::Impl::validate(int64_t step) {
  int64_t batches = std::min<int64_t>(o.valBatches, valData->stepsPerEpoch());
  valData->reset(); // the same batches every time, so the numbers compare
  std::vector<int32_t> vt(val.tokens()), vy(val.tokens());
  Clock::time_point start = Clock::now();
  double sum = 0;
  for (int64_t b = 0; b < batches; ++b) {
    valData->next(vt.data(), vy.data());
    if (!valData->status()) // an id outside the vocabulary (read, not checked at open)
      return valData->status();
    if (Status s = session->setInput("forward", "tokens", vt); !s)
      return s;
    if (Status s = session->setInput("forward", "targets", vy); !s)
      return s;
    if (Status s = session->run("forward"); !s)
      return s;
    StatusOr<float> loss = session->getScalarF32("forward", "loss");
    if (!loss)
      return loss.status();
    sum += *loss;
  }
  double ms = secondsSince(start) * 1e3;
  char buf[160];
  std::snprintf(buf, sizeof(buf), "val after step %lld | loss %.4f | %lld batches | %.1f ms\n",
                (long long)step, sum / double(batches), (long long)batches, ms);
  say(buf);
  if (log) {
    LogRecord r;
    r.kind = LogRecord::Kind::Val;
    r.step = step;
    r.loss = sum / double(batches);
    r.ms = ms;
    if (Status s = log->write(r); !s)
      return s;
  }
  return Status::ok();
}

Status Trainer::Impl::run() {
  Status ran = runSteps(lrScale);
  Status drained = drain();
  return ran ? drained : ran;
}

Status Trainer::Impl::findTrainTensors() {
  auto findIn = [&](const std::string &program, TrainTensors &io) -> Status {
    auto find = [&](const char *name) { return session->findTensor(name, program); };
    for (auto [name, out] : {std::pair{"tokens", &io.tokens}, std::pair{"targets", &io.targets},
                             std::pair{"loss", &io.loss}, std::pair{"grad_norm", &io.gradNorm}}) {
      StatusOr<uint32_t> t = find(name);
      if (!t)
        return t.status();
      *out = *t;
    }
    if (hasLr) {
      StatusOr<uint32_t> lr = find("lr");
      if (!lr)
        return lr.status();
      io.lr = *lr;
    }
    io.lrScale = find("lr_scale") ? int64_t(*find("lr_scale")) : -1;
    if (StatusOr<uint32_t> t = find("step"); t) {
      if (session->tensor(*t).dtype() != schema::DType::I32 ||
          session->tensor(*t).size_bytes() != 4)
        return Status::error("program '" + program + "': input " + session->describeTensor(*t) +
                             " should be an I32 scalar");
      io.step = *t;
    }
    return Status::ok();
  };
  if (Status s = findIn("train_step", io); !s)
    return s;
  firstPending = false;
  if (!session->program("train_step_first"))
    return Status::ok();
  if (Status s = findIn("train_step_first", firstIo); !s)
    return s;
  // @train_step_first while every FP8 history is all zeros: a run from
  // @init, or a checkpoint of one whose first update was skipped. One read
  // of the histories before the first step.
  firstPending = true;
  for (uint32_t i = 0; i < session->schema().tensors()->size() && firstPending; ++i) {
    const schema::Tensor &t = session->tensor(i);
    if (t.role() != schema::TensorRole::OptimizerState || !t.name() ||
        t.name()->str().rfind("fp8.amax_history.", 0) != 0)
      continue;
    std::vector<float> history(t.size_bytes() / sizeof(float));
    if (Status s = session->readTensor(i, history.data(), history.size() * sizeof(float)); !s)
      return s;
    for (float a : history)
      firstPending &= a == 0.0f;
  }
  return Status::ok();
}

/// Copies step `step`'s batch and scalars in, launches train_step and
/// reads its outputs back, all without waiting.
Status Trainer::Impl::enqueueStep(int64_t step, float lrScale) {
  StatusOr<data::BatchStage::Batch> batch = stage->acquire();
  if (!batch)
    return batch.status();
  // The loader steps this batch holds; one that starts an epoch is logged.
  for (uint64_t q = batch->position - uint64_t(train.accum); q < batch->position; ++q)
    if (q > 0 && q % uint64_t(trainData->stepsPerEpoch()) == 0)
      say("gptrun: " + o.data + ": epoch " + std::to_string(q / trainData->stepsPerEpoch()) +
          " begins at step " + std::to_string(step + 1) + "\n");
  // The step's time runs from when the device reaches this fence (after
  // the step before, or once enqueued) to its last fence.
  StatusOr<Backend::Fence> start = session->backend().recordFence();
  if (!start)
    return start.status();
  const bool first = firstPending;
  const std::string program = first ? "train_step_first" : "train_step";
  const TrainTensors &io = first ? firstIo : this->io;
  if (first)
    firstRanAt = step;
  firstPending = false;
  StepIo &slot = stepIo[step % 2];
  slot.step = int32_t(step);
  slot.lrScale = scaleAt(step);
  size_t bytes = size_t(train.tokens()) * sizeof(int32_t);
  if (Status s = session->setInputAsync(io.tokens, batch->tokens, bytes); !s)
    return s;
  if (Status s = session->setInputAsync(io.targets, batch->targets, bytes); !s)
    return s;
  if (io.step >= 0)
    if (Status s = session->setInputAsync(uint32_t(io.step), &slot.step, 4); !s)
      return s;
  if (io.lrScale >= 0)
    if (Status s = session->setInputAsync(uint32_t(io.lrScale), &slot.lrScale, 4); !s)
      return s;
  if (Status s = session->launch(program); !s)
    return s;
  if (Status s = session->getOutputAsync(io.loss, &slot.loss, 4); !s)
    return s;
  if (Status s = session->getOutputAsync(io.gradNorm, &slot.gradNorm, 4); !s)
    return s;
  if (io.lr >= 0)
    if (Status s = session->getOutputAsync(uint32_t(io.lr), &slot.lr, 4); !s)
      return s;
  StatusOr<Backend::Fence> fence = session->backend().recordFence();
  if (!fence)
    return fence.status();
  inFlight.push_back({step, batch->slot, batch->position, *start, *fence});
  return Status::ok();
}

Status Trainer::Impl::drain() {
  Status first = Status::ok();
  if (!inFlight.empty())
    first = session->backend().waitFence(inFlight.back().fence);
  inFlight.clear();
  stage.reset();
  if (stepIo)
    session->backend().freeHost(stepIo);
  stepIo = nullptr;
  return first;
}

/// Step s+1 is enqueued before step s's results are waited for, unless
/// something after step s needs the state right after it (validation, a
/// checkpoint, the last step, a stop, --on-nan=skip's copy, --no-overlap):
/// the host prepares and launches while the device computes.
Status Trainer::Impl::runSteps(float lrScale) {
  if (Status s = findTrainTensors(); !s)
    return s;
  Backend &backend = session->backend();
  data::HostAllocator pinned{[&backend](size_t n) { return backend.allocateHost(n); },
                             [&backend](void *p) { backend.freeHost(p); }};
  trainData->seek(dataPosition); // the stage reads ahead from here
  StatusOr<std::unique_ptr<data::BatchStage>> st =
      data::BatchStage::create(*trainData, train.accum, pinned);
  if (!st)
    return st.status();
  stage = std::move(*st);
  StatusOr<void *> ioMemory = backend.allocateHost(2 * sizeof(StepIo));
  if (!ioMemory)
    return ioMemory.status();
  stepIo = static_cast<StepIo *>(*ioMemory);

  // GPTC_PROFILE runs each step synchronously inside its launch: enqueueing
  // step s+1 early would book its time to step s.
  const bool ahead = o.overlap && o.onNan != "skip" && !std::getenv("GPTC_PROFILE");
  double steadySeconds = 0;
  const int64_t firstStep = stepsDone;
  int64_t next = firstStep;  // the next step to enqueue
  bool stopping = false;     // decided: stop once the step in flight is done
  Clock::time_point runStart = Clock::now();
  // --on-nan=skip: the last state known finite (before the first step,
  // then after each good one), which a bad step's update is undone to. A
  // finite loss and norm do not prove the update finite, so it is checked.
  std::optional<checkpoint::Checkpoint> good;
  if (o.onNan == "skip") {
    StatusOr<checkpoint::Checkpoint> snapshot = checkpoint::capture(*session);
    if (!snapshot)
      return snapshot.status();
    if (Status s = checkpoint::checkFinite(*snapshot); !s)
      return Status::error("the state before step " + std::to_string(stepsDone + 1) + ": " +
                           s.message());
    good.emplace(std::move(*snapshot));
  }
  while (!inFlight.empty() || next < o.steps) {
    if (inFlight.empty()) {
      if (Status s = enqueueStep(next++, lrScale); !s)
        return s;
    }
    const int64_t step = inFlight.front().step, done = step + 1;
    bool last = done == o.steps;
    // From the options, not valData (rank 0's only): the ranks decide alike.
    bool valNow = !o.val.empty() && ((o.valEvery > 0 && done % o.valEvery == 0) || last);
    bool ckptNow = !o.checkpointDir.empty() && o.checkpointEvery > 0 &&
                   done % o.checkpointEvery == 0;
    // One rank alone must not stop pipelining: the ranks' launches (and
    // their all-reduces) have to match, so only joint decisions count.
    bool localStop = !rank.agreeStop && (stopRequested.load() || stopSignal() != 0);
    if (ahead && inFlight.size() == 1 && next < o.steps && !valNow && !ckptNow && !stopping &&
        !localStop)
      if (Status s = enqueueStep(next++, lrScale); !s)
        return s;

    InFlight cur = inFlight.front();
    inFlight.pop_front();
    // On the device's clock: the host may notice the step late (it was
    // blocked launching the next one while the device's queue was full),
    // which would book part of this step to the next.
    StatusOr<double> timed = backend.waitFenceTimed(cur.start, cur.fence);
    if (!timed)
      return timed.status();
    const double seconds = *timed;
    if (Status s = stage->release(cur.slot); !s)
      return s;
    const StepIo out = stepIo[step % 2];
    stepsDone = done;
    dataPosition = cur.dataPosition;

    std::string cause; // why the step's update cannot stand; "" if it can
    if (!std::isfinite(out.loss) || !std::isfinite(out.gradNorm)) {
      cause = "not finite";
    } else if (good) {
      StatusOr<checkpoint::Checkpoint> after = checkpoint::capture(*session);
      if (!after)
        return after.status();
      if (Status s = checkpoint::checkFinite(*after); !s)
        cause = s.message() + " after the update";
      else
        good = std::move(*after);
    }
    if (!cause.empty()) {
      history.push_back({done, out.loss, out.gradNorm, 0.f, seconds});
      if (Status s = onNonFinite(done, out.loss, out.gradNorm, cause, good); !s)
        return s;
      // Skipped: the histories are @init's again, for the first program.
      if (step == firstRanAt)
        firstPending = true;
      if (last && !o.checkpointDir.empty() && (lead() || gathersState))
        if (StatusOr<std::string> path = checkpointNow(); !path)
          return path.status();
      continue;
    }
    float lr = hasLr ? out.lr : 0.f;
    history.push_back({done, out.loss, out.gradNorm, lr, seconds});
    if (step > firstStep)
      steadySeconds += seconds;
    double tokPerSec = double(train.tokens() * rank.worldSize) / seconds;
    std::string line = "step " + std::to_string(done) + "/" + std::to_string(o.steps);
    char buf[160];
    std::snprintf(buf, sizeof(buf), " | loss %.4f | norm %.4f", out.loss, out.gradNorm);
    line += buf;
    if (hasLr) {
      std::snprintf(buf, sizeof(buf), " | lr %.2e", lr);
      line += buf;
    }
    std::snprintf(buf, sizeof(buf), " | %.1f ms | %s tok/s", seconds * 1e3,
                  withCommas(std::llround(tokPerSec)).c_str());
    line += buf;
    if (peak > 0) {
      std::snprintf(buf, sizeof(buf), " | MFU %.1f%%", mfuPercent(tokPerSec, flopsPerTok, peak));
      line += buf;
    }
    int64_t memory = memoryInUse();
    line += " | mem " + (memory >= 0 ? formatBytes(uint64_t(memory)) : std::string("n/a"));
    say(line + "\n");
    if (log) {
      LogRecord r;
      r.step = done;
      r.loss = out.loss;
      r.gradNorm = out.gradNorm;
      r.lr = lr;
      r.ms = seconds * 1e3;
      r.tokPerSec = tokPerSec;
      r.mfu = peak > 0 ? mfuPercent(tokPerSec, flopsPerTok, peak) : -1;
      r.memoryBytes = memory;
      if (Status s = log->write(r); !s)
        return s;
    }
    // Validation and checkpoints see the state after this step: nothing
    // later was enqueued (above).
    if (valNow && valData)
      if (Status s = validate(done); !s)
        return s;
    int sig = stopSignal();
    bool stop = stopping || stopRequested.load() || sig != 0;
    if (rank.agreeStop)
      stop = rank.agreeStop(stop);
    if (stop && !inFlight.empty()) {
      stopping = true; // finish the step in flight first, then stop after it
      continue;
    }
    // Every N steps, after the last one, and before stopping on request.
    if (!o.checkpointDir.empty() && (lead() || gathersState) && (last || stop || ckptNow))
      if (StatusOr<std::string> path = checkpointNow(); !path)
        return path.status();
    if (stop) {
      say(std::string("gptrun: ") + (sig ? std::string(signalName(sig)) + ": " : "") +
          "stopped after step " + std::to_string(done) + " of " + std::to_string(o.steps) + "\n");
      return Status::ok();
    }
    if (drawBar && !last) {
      std::fputs(("\r" + progressBar(done, o.steps, secondsSince(runStart), firstStep)).c_str(),
                 stdout);
      std::fflush(stdout);
      barShown = true;
    }
  }
  if (o.steps - firstStep > 1) {
    double perStep = steadySeconds / double(o.steps - firstStep - 1);
    double tokPerSec = double(train.tokens() * rank.worldSize) / perStep;
    print("gptrun: steps %lld-%lld: %.1f ms/step, %s tok/s", (long long)(firstStep + 2),
          (long long)o.steps, perStep * 1e3, withCommas(std::llround(tokPerSec)).c_str());
    if (peak > 0)
      print(", MFU %.1f%%", mfuPercent(tokPerSec, flopsPerTok, peak));
    print("\n");
  }
  return Status::ok();
}

/// stop: an error naming the step and the last good checkpoint (none is
/// written of this step). skip: the parameters and optimizer state of the
/// last good step (`good`) go back, so this step's update is not applied;
/// the batch is consumed and the step counts towards --steps.
Status Trainer::Impl::onNonFinite(int64_t step, float loss, float norm, const std::string &cause,
                                  const std::optional<checkpoint::Checkpoint> &good) {
  char what[512];
  double lossScale = optimizerSetting(session->schema(), "loss_scale", 1);
  std::snprintf(what, sizeof(what), "step %lld: loss %g, grad norm %g: %s%s", (long long)step,
                loss, norm, cause.c_str(),
                lossScale != 1 ? " (the executable scales the loss by its --loss-scale; a lower "
                                 "scale keeps the gradients finite)"
                               : "");
  if (o.onNan != "skip")
    return Status::error(std::string(what) + "; " + stoppedText());
  if (Status s = checkpoint::restore(*session, *good, "the state before step " +
                                                         std::to_string(step));
      !s)
    return s;
  print("step %lld/%lld | loss %g | norm %g | %s: update skipped (--on-nan=skip)\n",
        (long long)step, (long long)o.steps, loss, norm, cause.c_str());
  std::fflush(stdout);
  return Status::ok();
}

Trainer::Trainer(const Options &options, RankContext rank)
    : impl(std::make_unique<Impl>(options, std::move(rank))) {}
Trainer::~Trainer() = default;
Status Trainer::setUp() { return impl->setUp(); }
Status Trainer::run() { return impl->run(); }
int64_t Trainer::step() const { return impl->stepsDone; }
const std::vector<StepRecord> &Trainer::history() const { return impl->history; }
Status Trainer::writeCheckpoint(const std::string &path) {
  if (!impl->session)
    return Status::error("no checkpoint before the trainer is set up");
  return impl->writeCheckpoint(path);
}
StatusOr<std::string> Trainer::checkpointNow() {
  if (!impl->session)
    return Status::error("no checkpoint before the trainer is set up");
  return impl->checkpointNow();
}
void Trainer::requestStop() { impl->stopRequested.store(true); }

StatusOr<std::string> resumePath(const Options &o) {
  if (o.resume != "latest")
    return o.resume;
  if (o.checkpointDir.empty())
    return Status::error("--resume latest needs --checkpoint-dir (or --log-dir)");
  StatusOr<std::string> path = checkpoint::latest(o.checkpointDir);
  if (!path)
    return Status::error("--resume latest: " + path.status().message());
  return *path;
}

Status train(const Options &options) {
  installStopSignals();
  Trainer t(options);
  if (Status s = t.setUp(); !s)
    return s;
  return t.run();
}

} // namespace gptc::gptrun

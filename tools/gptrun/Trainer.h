//===- Trainer.h - gptrun's training loop ---------------------------------===//
//
// init once (or restore a checkpoint), zero the optimizer state, then
// train_step per step with batches from the data loader, and forward over
// validation batches. Progress goes to stdout, one line per step;
// checkpoints go to Options::checkpointDir.
//
// The step loop has no host sync inside a step: step s+1's batch (from a
// data::BatchStage's pinned double buffers) and scalars are copied and its
// train_step launched before step s's loss, grad norm and lr are read back
// (into pinned double buffers), so the host prepares while the device
// computes. Where something needs the state right after step s (validation,
// a checkpoint, the last step, a stop, --on-nan=skip, --no-overlap), step
// s+1 waits until step s is done.
//
//===----------------------------------------------------------------------===//

#ifndef GPTC_TOOLS_GPTRUN_TRAINER_H
#define GPTC_TOOLS_GPTRUN_TRAINER_H

#include "runtime/collective/Collective.h"
#include "tools/gptrun/Options.h"

#include <functional>
#include <memory>

namespace gptc::gptrun {

/// One completed training step.
struct StepRecord {
  int64_t step = 0; // 1-based
  float loss = 0, gradNorm = 0, lr = 0;
  double seconds = 0;
};

/// Which data-parallel rank a Trainer is (tools/gptrun/Ranks.h makes
/// them). Rank r reads window step*worldSize + r of the data; only rank 0
/// prints, logs, validates and writes checkpoints.
struct RankContext {
  int rank = 0, worldSize = 1;
  int device = -1;                  // CUDA device; -1: Options::device
  Collective *collective = nullptr; // null: one device, no collectives
  /// Called after every step with this rank's wish to stop (signal or
  /// requestStop); returns the ranks' joint decision, so that all stop
  /// after the same step. Null: decide alone.
  std::function<bool(bool)> agreeStop;
};

class Trainer {
public:
  explicit Trainer(const Options &options, RankContext rank = {});
  ~Trainer();

  /// Opens the executable and the data, then runs init or, with --resume,
  /// restores the checkpoint. Errors name the file, program or tensor.
  Status setUp();
  /// Trains from the current step up to --steps.
  Status run();

  /// Steps completed (restored ones included).
  int64_t step() const;
  /// The steps this run completed, in order.
  const std::vector<StepRecord> &history() const;

  /// Writes the state after the last completed step to `path` atomically.
  /// Call between steps (after setUp), never while a program runs.
  Status writeCheckpoint(const std::string &path);
  /// The same as checkpointDir/step-N.ckpt, then keeps the newest
  /// --keep-checkpoints of them; returns the path written.
  StatusOr<std::string> checkpointNow();
  /// Async-signal-safe: makes run() stop after the step in flight, writing
  /// a checkpoint first when a checkpoint directory is set.
  void requestStop();

private:
  struct Impl;
  std::unique_ptr<Impl> impl;
};

/// The whole run; an error says which file, program or tensor is at fault.
Status train(const Options &options);

/// The checkpoint --resume names: the file itself, or for `latest` the
/// newest in --checkpoint-dir. Errors name the flag.
StatusOr<std::string> resumePath(const Options &options);

} // namespace gptc::gptrun

#endif // GPTC_TOOLS_GPTRUN_TRAINER_H

//===- Checkpoint.h - training state on disk, and back --------------------===//
//
// A checkpoint is everything train_step carries from one step to the next
// (every Parameter and OptimizerState tensor, by name), the step count, the
// training data loader's position, the seeds, and the identity of the
// model that wrote it, so that resuming continues bit-exactly and a
// checkpoint of another model is refused. The format is documented in
// docs/formats.md ("Checkpoints"); all integers are little-endian.
//
// Writes are atomic: a temporary file in the same directory is written,
// fsync'ed, renamed over the destination and the directory fsync'ed, so a
// crash leaves either the old file or the new one, never a partial one.
//
//===----------------------------------------------------------------------===//

#ifndef GPTC_RUNTIME_CHECKPOINT_CHECKPOINT_H
#define GPTC_RUNTIME_CHECKPOINT_CHECKPOINT_H

#include "runtime/executable/Executable.h"

#include <cstdint>
#include <string>
#include <vector>

namespace gptc {

class Session;

namespace checkpoint {

struct Tensor {
  std::string name;
  schema::TensorRole role = schema::TensorRole::Parameter;
  schema::DType dtype = schema::DType::F32;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;
};

/// One optimizer setting (schema Hyperparameter): "lr", "schedule", ...
struct Setting {
  std::string key;
  double value = 0;
};

/// The format written; 1 and 2 are still read.
constexpr uint32_t kFormatVersion = 3;

struct Checkpoint {
  /// The format version it was read from (kFormatVersion when made here).
  uint32_t version = kFormatVersion;
  /// executableIdentity() of the executable that wrote it (format < 3:
  /// the older identity, which also hashed the name, batch and T), and its
  /// describeModel() text for error messages.
  uint64_t identity = 0;
  std::string model;
  /// Training steps completed; the next step to run is `step` (0-based).
  int64_t step = 0;
  /// The training DataLoader's position() after `step` steps.
  uint64_t dataPosition = 0;
  /// The RNG state: @init's seed and the data loader's shuffle seed (gptrun
  /// has no other randomness; train_step is deterministic).
  uint64_t seed = 0;
  uint64_t dataSeed = 0;
  /// The training data: its token count and Hash64 of its tokens (0, 0 in
  /// format 1 files: unknown). Resuming on other data cannot repeat the
  /// uninterrupted run; gptrun says so.
  uint64_t dataTokens = 0;
  uint64_t dataHash = 0;
  /// Tokens one data position covers, B*T*ranks, when it was written (0 in
  /// format < 3: unknown), so that a run with another B or T goes on at
  /// the same token.
  uint64_t dataStepTokens = 0;
  /// The optimizer and schedule the run trained with: the executable's
  /// Model.optimizer with gptrun --lr applied to lr and min_lr (empty in
  /// format < 3). A resume under another schedule is refused.
  std::vector<Setting> optimizer;
  std::vector<Tensor> tensors;
};

/// A hash of what a checkpoint's tensors depend on: the architecture
/// (n_layer, n_head, n_embd, vocab_size, padded_vocab_size, block_size) and
/// every Parameter and OptimizerState tensor's name, role, dtype and shape;
/// not the name, batch, T or rank count. Any executable of the same model
/// (any target, batch, T <= block_size, a precision that keeps the layout)
/// gives the same identity. `format` < 3: the identity those files hold,
/// which also hashed the model's name and its whole config (B and T).
uint64_t executableIdentity(const schema::Executable &exe, uint32_t format = kFormatVersion);

/// The executable's optimizer settings (Model.optimizer), lr and min_lr
/// times `lrScale` (gptrun --lr).
std::vector<Setting> optimizerSettings(const schema::Executable &exe, double lrScale = 1);
/// "" when `trained` and `now` agree on the schedule and the AdamW settings
/// (keys absent on either side are not compared), else the differences:
/// "total_steps 100 -> 200, lr 0.001 -> 0.0006".
std::string scheduleDifference(const std::vector<Setting> &trained,
                               const std::vector<Setting> &now);
/// "schedule=cosine lr=0.001 min_lr=0.0001 warmup_steps=10 total_steps=100 beta1=0.9 ..."
std::string describeSettings(const std::vector<Setting> &settings);
/// "model 'mini' (n_layer=2, n_embd=64, ...), 26 parameter and 52 state tensors"
std::string describeModel(const schema::Executable &exe);

/// Writes `ckpt` to `path` atomically (see above). Errors name the file.
/// A checkpoint holding a NaN or an infinity is refused (checkFinite):
/// resuming from it could only fail, and it would replace a good one.
Status writeCheckpoint(const std::string &path, const Checkpoint &ckpt);
/// An error naming the first tensor of `ckpt` that holds a NaN or an
/// infinity (f32, f64, bf16, f16, FP8 values), its role and the element.
Status checkFinite(const Checkpoint &ckpt);
/// Reads and verifies `path` (magic, version, checksum, lengths). Errors
/// name the file and what is wrong with it.
StatusOr<Checkpoint> readCheckpoint(const std::string &path);
/// readCheckpoint's checks on a file's bytes; errors name `origin`.
StatusOr<Checkpoint> parseCheckpoint(const std::string &data, const std::string &origin);

/// Copies the session's Parameter and OptimizerState tensors into a
/// checkpoint (identity and model filled in; the caller sets step, data
/// position and seeds).
StatusOr<Checkpoint> capture(Session &session);
/// Refuses a checkpoint of another model (the message names both; format
/// < 3 files: of another model, batch or T), then
/// writes every tensor back; every Parameter and OptimizerState tensor of
/// the session must be in the checkpoint with the same dtype and shape.
Status restore(Session &session, const Checkpoint &ckpt, const std::string &origin);

/// "step-00000100.ckpt": the name the writers below use in a directory.
std::string fileName(int64_t step);
struct Entry {
  int64_t step;
  std::string path;
};
/// The step-N.ckpt files of `dir`, by increasing step (temporaries and
/// other files are ignored). A missing directory is an error.
StatusOr<std::vector<Entry>> list(const std::string &dir);
/// Deletes the temporaries of `dir` that checkpoint writes killed midway
/// left (step-N.ckpt.tmp-*, gptrun's write probes). Only for a caller that
/// holds the directory's lock: a live writer's temporary would go too.
struct Removed {
  int64_t files = 0;
  uint64_t bytes = 0;
};
StatusOr<Removed> removeTemporaries(const std::string &dir);
/// The path of the highest-step checkpoint in `dir`; an error names the
/// directory when there is none.
StatusOr<std::string> latest(const std::string &dir);
/// Of the checkpoints of `dir` at steps <= `upTo` (the step just written),
/// deletes all but the `keep` highest (keep >= 1). Later ones are left.
Status prune(const std::string &dir, int64_t keep, int64_t upTo);

} // namespace checkpoint
} // namespace gptc

#endif // GPTC_RUNTIME_CHECKPOINT_CHECKPOINT_H

//===- Executable.h - load and check a step.fb executable ----------------===//
//
// The loader is the runtime's gate: the FlatBuffers verifier checks the
// buffer's structure, then checkExecutable checks what the schema cannot
// (version, every index in range, tensors inside their pools, launch
// shapes, cross-stream accesses ordered by events). Nothing downstream
// re-checks.
//
//===----------------------------------------------------------------------===//

#ifndef GPTC_RUNTIME_EXECUTABLE_EXECUTABLE_H
#define GPTC_RUNTIME_EXECUTABLE_EXECUTABLE_H

#include "runtime/schemas/executable_generated.h"
#include "runtime/support/Status.h"

#include <cstdint>
#include <string>
#include <vector>

namespace gptc {

/// A loaded, verified executable. Owns its bytes.
class Executable {
public:
  /// Reads and verifies `path`; errors name the file.
  static StatusOr<Executable> loadFile(const std::string &path);
  /// Verifies `bytes` (copied); `origin` names them in errors.
  static StatusOr<Executable> loadBytes(std::vector<uint8_t> bytes,
                                        const std::string &origin);

  const schema::Executable &get() const { return *schema::GetExecutable(bytes_.data()); }
  const schema::Executable *operator->() const { return &get(); }

  /// The program named `name`, or null.
  const schema::Program *findProgram(const std::string &name) const;

private:
  explicit Executable(std::vector<uint8_t> bytes) : bytes_(std::move(bytes)) {}
  std::vector<uint8_t> bytes_;
};

/// What writers pass as CreateExecutable's `checksum` so that the field is
/// stored (FlatBuffers leaves out fields at their default, 0);
/// sealExecutable then overwrites it.
inline constexpr uint64_t kUnsealedChecksum = ~uint64_t(0);

/// Stores the checksum of a finished executable buffer in place. The
/// buffer must verify and hold the `checksum` field.
Status sealExecutable(std::vector<uint8_t> &bytes);

/// The semantic checks beyond the FlatBuffers verifier, ending with
/// checkSchedule (ScheduleCheck.h): streams that share bytes are ordered.
Status checkExecutable(const schema::Executable &exe);

/// Bytes per element of `dtype`.
uint32_t elementSize(schema::DType dtype);

/// The compiled optimizer setting `key` (Model.optimizer: lr, loss_scale,
/// ...), or `fallback` when the executable does not record it.
double optimizerSetting(const schema::Executable &exe, const std::string &key, double fallback);
/// The model's config value `key` (Model.config: n_layer, world_size, ...),
/// or `fallback` when it is absent.
int64_t configValue(const schema::Executable &exe, const std::string &key, int64_t fallback);

} // namespace gptc

#endif // GPTC_RUNTIME_EXECUTABLE_EXECUTABLE_H

//===- Safetensors.h - Hugging Face's safetensors format, read and written ===//
//
// A safetensors file is an 8-byte little-endian header length N, N bytes
// of JSON ({"name": {"dtype": "F32", "shape": [...], "data_offsets":
// [begin, end]}, ..., optional "__metadata__": {string: string}}), then
// the tensors' raw little-endian bytes, offsets relative to the end of the
// header. Reading checks everything a truncated or hand-made file can get
// wrong before any tensor is used: the header's length against the file's,
// every offset in range, the tensors tiling the data exactly (no gaps, no
// overlaps, nothing after), and dtype size x shape = byte length. Errors
// name the file and the tensor.
//
// Writing is deterministic (tensors sorted by name, header padded with
// spaces to a multiple of 8, as Hugging Face's writer pads it) and atomic.
//
//===----------------------------------------------------------------------===//

#ifndef GPTC_RUNTIME_CHECKPOINT_SAFETENSORS_H
#define GPTC_RUNTIME_CHECKPOINT_SAFETENSORS_H

#include "runtime/support/Status.h"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace gptc::safetensors {

/// The dtypes gptc reads and writes: GPT-2 checkpoints are F32, BF16 or
/// F16; I32 holds token ids (gptrun --logits-out).
enum class DType { F32, BF16, F16, I32 };
const char *dtypeName(DType dtype);
size_t dtypeSize(DType dtype);

struct TensorView {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  const uint8_t *data = nullptr; // into the File's buffer
  size_t size = 0;               // bytes
};

/// A whole file in memory, verified.
class File {
public:
  /// Reads and verifies `path`. Refuses what is not a regular file, so a
  /// device (/dev/zero) is never read whole.
  static StatusOr<File> read(const std::string &path);
  /// Verifies `bytes` (moved in); `origin` names them in errors.
  static StatusOr<File> parse(std::vector<uint8_t> bytes, const std::string &origin);
  // The views point into bytes_: moving keeps them valid, copying would not.
  File(File &&) = default;
  File &operator=(File &&) = default;
  File(const File &) = delete;
  File &operator=(const File &) = delete;

  /// In data order.
  const std::vector<TensorView> &tensors() const { return tensors_; }
  /// The tensor named `name`, or null.
  const TensorView *find(const std::string &name) const;
  const std::map<std::string, std::string> &metadata() const { return metadata_; }
  const std::string &origin() const { return origin_; }

private:
  File() = default;
  std::string origin_;
  std::vector<uint8_t> bytes_; // moving a vector keeps the views valid
  std::vector<TensorView> tensors_;
  std::map<std::string, std::string> metadata_;
};

/// What the writer takes: `data` points to `size` bytes the caller keeps.
struct TensorRef {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  const void *data = nullptr;
  size_t size = 0;
};

/// The file's bytes: tensors sorted by name, data in that order.
StatusOr<std::vector<uint8_t>> serialize(std::vector<TensorRef> tensors,
                                         const std::map<std::string, std::string> &metadata);
/// serialize(), written to `path` atomically.
Status write(const std::string &path, std::vector<TensorRef> tensors,
             const std::map<std::string, std::string> &metadata);

} // namespace gptc::safetensors

#endif // GPTC_RUNTIME_CHECKPOINT_SAFETENSORS_H

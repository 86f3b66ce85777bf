//===- CheckpointFuzzer.cpp - libFuzzer target: the checkpoint reader -----===//
//
// Any bytes as a step-N.ckpt: parseCheckpoint accepts or refuses them with
// a Status, never crashes or reads out of bounds, and an accepted
// checkpoint's tensors hold exactly the bytes their shapes and types need,
// which checkFinite (gptrun --resume runs it) then scans.
//
//===----------------------------------------------------------------------===//

#include "runtime/checkpoint/Checkpoint.h"
#include "runtime/support/Hash64.h"

#include <cstdlib>
#include <cstring>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  using namespace gptc;
  std::string bytes(reinterpret_cast<const char *>(data), size);
  // Nearly every mutation breaks the trailing checksum: recompute it for
  // half the inputs, so that the checks behind it stay fuzzed too.
  if (size % 2 && size >= 8) {
    Hash64 h;
    h.update(bytes.data(), size - 8);
    uint64_t sum = h.value();
    std::memcpy(bytes.data() + size - 8, &sum, 8);
  }
  StatusOr<checkpoint::Checkpoint> c = checkpoint::parseCheckpoint(bytes, "fuzz");
  if (!c)
    return 0;
  (void)checkpoint::checkFinite(*c);
  uint64_t total = 0;
  for (const checkpoint::Tensor &t : c->tensors)
    total += t.bytes.size();
  if (total > size)
    std::abort(); // the tensors cannot hold more bytes than the file
  return 0;
}

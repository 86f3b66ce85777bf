//===- Hash64.h - the 64-bit hash of checkpoints and executables ----------===//
//
// Not cryptographic: it catches truncation and corruption (a flipped byte,
// a partial copy), not tampering.
//
//===----------------------------------------------------------------------===//

#ifndef GPTC_RUNTIME_SUPPORT_HASH64_H
#define GPTC_RUNTIME_SUPPORT_HASH64_H

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace gptc {

/// FNV-1a's constants over 64-bit words (8x fewer rounds than bytes, which
/// matters for GiB-sized optimizer state); the tail is zero-padded.
class Hash64 {
public:
  void update(const void *data, size_t size) {
    const auto *p = static_cast<const uint8_t *>(data);
    size_t i = 0;
    for (; tailBytes && i < size; ++i)
      push(p[i]);
    for (; i + 8 <= size; i += 8) {
      uint64_t w;
      std::memcpy(&w, p + i, 8);
      mix(w);
    }
    for (; i < size; ++i)
      push(p[i]);
  }
  uint64_t value() const {
    Hash64 h = *this;
    if (h.tailBytes)
      h.mix(h.tail);
    return h.h;
  }

private:
  void push(uint8_t byte) {
    tail |= uint64_t(byte) << (8 * tailBytes);
    if (++tailBytes == 8) {
      mix(tail);
      tail = 0;
      tailBytes = 0;
    }
  }
  void mix(uint64_t w) {
    h ^= w;
    h *= 0x100000001b3ull;
    h ^= h >> 29;
  }
  uint64_t h = 0xcbf29ce484222325ull, tail = 0;
  unsigned tailBytes = 0;
};

} // namespace gptc

#endif // GPTC_RUNTIME_SUPPORT_HASH64_H

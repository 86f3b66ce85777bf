//===- SafetensorsFuzzer.cpp - libFuzzer target: safetensors files --------===//
//
// Any bytes: File::parse returns a verified file or a Status. An accepted
// file's tensors tile its data (every byte of every view is read, so ASan
// sees any view outside the buffer), each is dtype size x elements bytes,
// and written again with serialize() it parses to the same tensors.
//
//===----------------------------------------------------------------------===//

#include "runtime/checkpoint/Safetensors.h"

#include <cstdlib>
#include <cstring>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  using namespace gptc::safetensors;
  auto f = File::parse(std::vector<uint8_t>(data, data + size), "fuzz");
  if (!f)
    return 0;
  uint64_t header = 0;
  std::memcpy(&header, data, 8);
  size_t total = 0;
  unsigned sum = 0;
  std::vector<TensorRef> refs;
  for (const TensorView &t : f->tensors()) {
    uint64_t elements = 1;
    for (int64_t d : t.shape)
      elements *= uint64_t(d);
    if (elements * dtypeSize(t.dtype) != t.size)
      std::abort(); // accepted a size that is not the shape's
    for (size_t i = 0; i < t.size; ++i)
      sum += t.data[i];
    total += t.size;
    refs.push_back({t.name, t.dtype, t.shape, t.data, t.size});
  }
  if (8 + header + total != size)
    std::abort(); // accepted data the tensors do not tile
  auto bytes = serialize(refs, f->metadata());
  if (!bytes)
    std::abort(); // a verified file must serialize
  auto again = File::parse(*bytes, "again");
  if (!again || again->tensors().size() != f->tensors().size() || again->metadata() != f->metadata())
    std::abort(); // its own output must parse to the same file
  for (const TensorView &t : again->tensors()) {
    const TensorView *o = f->find(t.name);
    if (!o || o->dtype != t.dtype || o->shape != t.shape || o->size != t.size ||
        (t.size && std::memcmp(o->data, t.data, t.size) != 0))
      std::abort();
  }
  return sum == 0xFFFFFFFF; // keep the reads
}

//===- TokenFileFuzzer.cpp - libFuzzer target: llm.c token files ----------===//
//
// Any bytes, with and without a vocabulary bound: parseTokenFile returns
// tokens or a Status; accepted tokens respect the bound and the header's
// count.
//
//===----------------------------------------------------------------------===//

#include "runtime/data/TokenFile.h"

#include <cstdlib>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  using namespace gptc::data;
  std::string_view bytes(reinterpret_cast<const char *>(data), size);
  for (int64_t vocab : {int64_t(0), int64_t(50257), int64_t(7)}) {
    auto tokens = parseTokenFile(bytes, vocab);
    if (!tokens)
      continue;
    if (kTokenFileHeaderBytes + tokens->size() * 2 != size)
      std::abort(); // accepted a file whose size does not match its tokens
    if (vocab)
      for (uint16_t t : *tokens)
        if (t >= vocab)
          std::abort(); // accepted an id outside the vocabulary
  }
  return 0;
}

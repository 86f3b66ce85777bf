//===- TokenizerFuzzer.cpp - libFuzzer target: the GPT-2 tokenizer --------===//
//
// GPT-2's vocabulary from $GPTC_VOCAB_DIR (default data/gpt2). Any bytes as
// text: encode must not crash and decode(encode(text)) must give the text
// back (byte-level BPE is lossless, invalid UTF-8 included). The same bytes
// as little-endian 16-bit ids: decode accepts exactly the in-vocabulary ones.
//
//===----------------------------------------------------------------------===//

#include "runtime/data/Tokenizer.h"

#include <cstdio>
#include <cstdlib>
#include <optional>

using gptc::data::Tokenizer;

static Tokenizer &tokenizer() {
  static std::optional<Tokenizer> t = [] {
    const char *dir = std::getenv("GPTC_VOCAB_DIR");
    auto loaded = Tokenizer::load(dir ? dir : "data/gpt2");
    if (!loaded) {
      std::fprintf(stderr, "TokenizerFuzzer: %s\n", loaded.status().message().c_str());
      std::exit(1);
    }
    return std::optional<Tokenizer>(std::move(*loaded));
  }();
  return *t;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  Tokenizer &tok = tokenizer();
  std::string_view text(reinterpret_cast<const char *>(data), size);
  bool special = size && (data[0] & 1);
  std::vector<int32_t> ids = tok.encode(text, special);
  auto back = tok.decode(ids);
  if (!back || *back != text)
    std::abort(); // encode/decode is not lossless
  std::vector<int32_t> raw;
  bool inVocab = true;
  for (size_t i = 0; i + 1 < size; i += 2) {
    raw.push_back(int32_t(data[i] | (data[i + 1] << 8)));
    inVocab &= raw.back() < tok.vocabSize();
  }
  if (bool(tok.decode(raw)) != inVocab)
    std::abort(); // decode's acceptance disagrees with the vocabulary size
  return 0;
}

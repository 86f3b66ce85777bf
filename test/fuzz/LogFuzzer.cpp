//===- LogFuzzer.cpp - libFuzzer target: gptplot's log reader -------------===//
//
// Any text as a gptrun log.jsonl: parseLog returns curves or a Status that
// names the line (torn records are skipped), and renderSvg draws accepted
// curves with finite coordinates only, or says why it cannot.
//
//===----------------------------------------------------------------------===//

#include "tools/gptplot/Plot.h"

#include <cstdlib>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  using namespace gptc::gptplot;
  std::string_view text(reinterpret_cast<const char *>(data), size);
  gptc::StatusOr<Curves> curves = parseLog(text, "fuzz");
  if (!curves)
    return 0;
  gptc::StatusOr<std::string> svg = renderSvg(*curves, PlotOptions());
  if (!svg)
    return 0;
  // A non-finite coordinate or tick label prints as a "nan" or "inf" word
  // of its own (after a quote, '>', ' ', ',' or '-'; "dominant" is fine).
  for (const char *word : {"nan", "inf"})
    for (size_t at = svg->find(word); at != std::string::npos; at = svg->find(word, at + 1))
      if (at > 0 && std::string_view("\"> ,-").find((*svg)[at - 1]) != std::string_view::npos)
        std::abort();
  return 0;
}

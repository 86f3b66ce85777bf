//===- Throughput.cpp - tokens/s, MFU and the GPU peak table --------------===//

#include "tools/gptrun/Throughput.h"

namespace gptc::gptrun {

double flopsPerToken(int64_t numParameters, int64_t nLayer, int64_t seqLen, int64_t nEmbd) {
  return 6.0 * double(numParameters) + 12.0 * double(nLayer) * double(seqLen) * double(nEmbd);
}

double peakTflops(const std::string &name) {
  auto has = [&](const char *s) { return name.find(s) != std::string::npos; };
  // Dense BF16 tensor-core peaks from NVIDIA's data sheets.
  if (has("H200"))
    return 989.5;
  if (has("H100"))
    return has("PCIe") ? 756.0 : has("NVL") ? 835.0 : 989.5; // plain "H100" is the SXM part
  if (has("A100"))
    return 312.0;
  return 0;
}

double mfuPercent(double tokensPerSecond, double flopsPerToken, double peakTflops) {
  if (peakTflops <= 0)
    return 0;
  return 100.0 * tokensPerSecond * flopsPerToken / (peakTflops * 1e12);
}

std::string withCommas(int64_t v) {
  std::string digits = std::to_string(v < 0 ? -v : v), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i && (digits.size() - i) % 3 == 0)
      out += ',';
    out += digits[i];
  }
  return v < 0 ? "-" + out : out;
}

} // namespace gptc::gptrun

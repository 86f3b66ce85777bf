//===- Throughput.h - tokens/s, MFU and the GPU peak table ----------------===//
//
// MFU as llm.c and the PaLM paper count it: a training token costs
// 6*N_params FLOPs in the matmuls (2 forward, 4 backward) plus
// 12*n_layer*T*n_embd in attention (QK^T and AV, forward and backward),
// against the GPU's dense BF16 peak whatever the executable's precision.
//
//===----------------------------------------------------------------------===//

#ifndef GPTC_TOOLS_GPTRUN_THROUGHPUT_H
#define GPTC_TOOLS_GPTRUN_THROUGHPUT_H

#include <cstdint>
#include <string>

namespace gptc::gptrun {

/// FLOPs of one training token: 6*N + 12*L*T*C.
double flopsPerToken(int64_t numParameters, int64_t nLayer, int64_t seqLen, int64_t nEmbd);

/// Dense BF16 peak in TFLOP/s of the GPU named `deviceName` (as
/// cudaGetDeviceProperties names it), or 0 when it is not in the table.
double peakTflops(const std::string &deviceName);

/// Model FLOPs utilization in percent; 0 when peak is 0.
double mfuPercent(double tokensPerSecond, double flopsPerToken, double peakTflops);

/// 53120 -> "53,120".
std::string withCommas(int64_t v);

} // namespace gptc::gptrun

#endif // GPTC_TOOLS_GPTRUN_THROUGHPUT_H

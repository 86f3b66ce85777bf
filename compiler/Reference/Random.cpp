//===- Random.cpp - reference gpt.random_normal ---------------------------===//
//
// The fp64/fp32 reference of the Random kernel family
// (compiler/Codegen/Kernels/Random.cpp): gpt.random_normal, counter-based
// (counterNormal, which the runtimes compute the same).
//
//===----------------------------------------------------------------------===//

#include "compiler/Reference/Evaluator.h"

namespace gptc::reference {

namespace {

uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

} // namespace

double counterNormal(uint64_t seed, uint64_t stream, uint64_t index) {
  uint64_t key = splitmix64(seed) ^ splitmix64(stream * 0xD1B54A32D192ED03ull);
  uint64_t a = splitmix64(key + 2 * index), b = splitmix64(key + 2 * index + 1);
  double u1 = (static_cast<double>(a >> 11) + 1.0) * 0x1.0p-53; // (0, 1]
  double u2 = static_cast<double>(b >> 11) * 0x1.0p-53;         // [0, 1)
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
}

template <typename T>
LogicalResult Evaluator<T>::randomNormal(RandomNormalOp op) {
  double seedValue = static_cast<double>(in(op.getSeed())[0]);
  if (seedValue != std::floor(seedValue) || std::fabs(seedValue) >= 16777216.0)
    return op.emitOpError("seed must be an integer below 2^24 in the interpreter");
  uint64_t seed = static_cast<uint64_t>(static_cast<int64_t>(seedValue));
  Buffer &y = out(op.getResult());
  T std = static_cast<T>(op.getStd().convertToDouble());
  for (size_t i = 0; i < y.size(); ++i)
    y[i] = std * static_cast<T>(counterNormal(seed, op.getStream(), i));
  return success();
}

#define INSTANTIATE(T)                                               \
  template LogicalResult Evaluator<T>::randomNormal(RandomNormalOp);
GPTC_REFERENCE_ELEMENT_TYPES(INSTANTIATE)
#undef INSTANTIATE

} // namespace gptc::reference

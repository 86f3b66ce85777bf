//===- Sampler.cpp - next-token sampling from a logits row ----------------===//

#include "tools/gptrun/Sampler.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace gptc::gptrun {

StatusOr<int32_t> sampleToken(const float *logits, int64_t vocab, const SamplingOptions &options,
                              double u) {
  if (vocab < 1)
    return Status::error("sampling: empty vocabulary");
  if (!(options.temperature >= 0) || options.topK < 0)
    return Status::error("sampling: temperature and top-k must not be negative");
  for (int64_t i = 0; i < vocab; ++i)
    if (!std::isfinite(logits[i]))
      return Status::error("sampling: logit of token " + std::to_string(i) + " is " +
                           std::to_string(logits[i]) + ", not finite");
  // Candidates by descending logit; the id breaks ties so the order (and the
  // draw) is the same on every platform.
  std::vector<int32_t> ids(static_cast<size_t>(vocab));
  std::iota(ids.begin(), ids.end(), 0);
  int64_t k = options.topK == 0 ? vocab : std::min(options.topK, vocab);
  if (options.temperature == 0)
    k = 1;
  auto before = [&](int32_t a, int32_t b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  };
  std::partial_sort(ids.begin(), ids.begin() + k, ids.end(), before);
  if (k == 1)
    return ids[0];

  double top = logits[ids[0]];
  std::vector<double> cdf(static_cast<size_t>(k));
  double sum = 0;
  for (int64_t i = 0; i < k; ++i) {
    sum += std::exp((double(logits[ids[i]]) - top) / options.temperature);
    cdf[i] = sum;
  }
  double target = std::clamp(u, 0.0, 1.0) * sum;
  auto it = std::upper_bound(cdf.begin(), cdf.end(), target);
  int64_t pick = std::min<int64_t>(it - cdf.begin(), k - 1);
  return ids[pick];
}

Window contextWindow(size_t numTokens, int64_t seq) {
  size_t length = std::min(numTokens, static_cast<size_t>(std::max<int64_t>(seq, 0)));
  return {numTokens - length, length};
}

std::vector<int32_t> windowBatch(const std::vector<int32_t> &tokens, Window window, int64_t rows,
                                 int64_t seq, int32_t pad) {
  std::vector<int32_t> batch(static_cast<size_t>(rows * seq), pad);
  std::copy_n(tokens.begin() + window.begin, window.length, batch.begin());
  return batch;
}

} // namespace gptc::gptrun

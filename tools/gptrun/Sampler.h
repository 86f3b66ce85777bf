//===- Sampler.h - next-token sampling from a logits row ------------------===//
//
// The pure half of `gptrun --sample`: drawing a token from one row of
// logits (top-k, then a temperature softmax), the seeded uniform source it
// draws with, and the context window that slides once the text outgrows
// the compiled sequence length. Generate.h drives @logits with them.
//
//===----------------------------------------------------------------------===//

#ifndef GPTC_TOOLS_GPTRUN_SAMPLER_H
#define GPTC_TOOLS_GPTRUN_SAMPLER_H

#include "runtime/support/Status.h"

#include <cstdint>
#include <random>
#include <vector>

namespace gptc::gptrun {

struct SamplingOptions {
  double temperature = 1.0; // 0: greedy (the largest logit)
  int64_t topK = 40;        // 0: the whole vocabulary
};

/// Draws a token id in [0, vocab) from `logits[0, vocab)`: keeps the topK
/// largest logits (ties: the lower id first), turns them into
/// softmax(logit / temperature) and picks by inverse CDF at `u` in [0, 1).
/// Columns at or past `vocab` (the padding of Vp) are never read. Fails on
/// a non-finite logit, naming its id.
StatusOr<int32_t> sampleToken(const float *logits, int64_t vocab, const SamplingOptions &options,
                              double u);

/// Uniform doubles in [0, 1) from a seed. std::mt19937_64's sequence is
/// fixed by the C++ standard (unlike the std distributions), so a seed gives
/// the same text with any standard library.
class UniformSource {
public:
  explicit UniformSource(uint64_t seed) : engine(seed) {}
  double next() { return double(engine() >> 11) * 0x1.0p-53; }

private:
  std::mt19937_64 engine;
};

/// The tokens the model sees: the last `seq` of `numTokens` (all of them
/// while they fit). The next token is predicted at position length - 1.
struct Window {
  size_t begin = 0, length = 0;
};
Window contextWindow(size_t numTokens, int64_t seq);

/// A (rows, seq) I32 batch: `window` in row 0 from position 0, `pad`
/// everywhere else. The model is causal, so the padding after the window
/// and in the other rows cannot change row 0's logits up to the window.
std::vector<int32_t> windowBatch(const std::vector<int32_t> &tokens, Window window, int64_t rows,
                                 int64_t seq, int32_t pad);

} // namespace gptc::gptrun

#endif // GPTC_TOOLS_GPTRUN_SAMPLER_H

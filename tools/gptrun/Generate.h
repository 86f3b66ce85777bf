//===- Generate.h - gptrun --sample: text from a checkpoint ---------------===//
//
// Loads the parameters (a checkpoint, or @init), encodes the prompt with
// GPT-2's tokenizer, then per new token runs program "logits" on the
// window of the text in row 0 and draws the next token from row 0 at the
// window's last position (Sampler.h). The text streams to stdout.
//
//===----------------------------------------------------------------------===//

#ifndef GPTC_TOOLS_GPTRUN_GENERATE_H
#define GPTC_TOOLS_GPTRUN_GENERATE_H

#include "runtime/executor/Session.h"
#include "tools/gptrun/Options.h"
#include "tools/gptrun/Sampler.h"

#include <cstdio>

namespace gptc::gptrun {

/// Program "logits" of a session: tokens (B, T) -> logits (B, T, Vp).
class Generator {
public:
  /// Checks the program: an I32 (B, T) input "tokens", an F32 (B, T, Vp)
  /// output "logits", and the config's vocab_size <= Vp.
  static StatusOr<Generator> create(Session &session);

  int64_t rows() const { return rows_; }
  int64_t seq() const { return seq_; }
  int64_t vocab() const { return vocab_; }
  int64_t paddedVocab() const { return paddedVocab_; }

  /// Runs @logits on the window of `tokens` (non-empty, ids below vocab())
  /// and draws the token that follows them.
  StatusOr<int32_t> next(const std::vector<int32_t> &tokens, const SamplingOptions &options,
                         UniformSource &uniform);
  /// Runs @logits on `tokens` (1 to T of them, in row 0) and returns row
  /// 0's logits, (tokens, vocab()) row-major, the padding columns left out.
  StatusOr<std::vector<float>> rowLogits(const std::vector<int32_t> &tokens);
  /// Runs @logits on a whole (B, T) batch; the (B, T, Vp) result stays
  /// valid until the next call.
  StatusOr<const std::vector<float> *> batchLogits(const std::vector<int32_t> &batch);

private:
  Session *session = nullptr;
  uint32_t logitsIndex = 0;
  int64_t rows_ = 0, seq_ = 0, vocab_ = 0, paddedVocab_ = 0;
  std::vector<float> logits;
};

/// The parameters --sample and --eval use: --resume's checkpoint,
/// --init-from's weights, or @init with --seed (and a warning on `log`).
Status loadParameters(Session &session, const Options &options, std::FILE *log);

/// The session --sample and --eval run @logits in: --target, --device and
/// the GEMM flags as training takes them, a bad --device refused.
StatusOr<std::unique_ptr<Session>> openLogitsSession(const Options &options);

/// The whole of `gptrun --sample`: the decoded text goes to `out` as it is
/// drawn, notes and warnings to `log`. Errors name the flag, file or program.
Status sample(const Options &options, std::FILE *out = stdout, std::FILE *log = stderr);

} // namespace gptc::gptrun

#endif // GPTC_TOOLS_GPTRUN_GENERATE_H

//===- Eval.h - gptrun --eval: HellaSwag-style multiple choice ------------===//
//
// hellaswag_val.jsonl (github.com/rowanz/hellaswag, data/) has one JSON
// object per line: "ctx" (the context), "endings" (4 strings) and "label"
// (the index of the right one). As llm.c and nanoGPT score it, each
// ending is encoded with a leading space after the context; the model's
// choice is the ending with the lowest mean cross-entropy over its own
// tokens (acc_norm), and also reported, the lowest sum (acc).
//
// Each candidate (context + ending) is a row of the executable's @logits
// program, packed B rows to a run; a row longer than T loses context
// tokens from its left. The logits come back whole, so an eval executable
// compiled with a small T (HellaSwag's rows are under ~160 tokens) is much
// faster than the training one.
//
//===----------------------------------------------------------------------===//

#ifndef GPTC_TOOLS_GPTRUN_EVAL_H
#define GPTC_TOOLS_GPTRUN_EVAL_H

#include "runtime/data/Tokenizer.h"
#include "tools/gptrun/Options.h"

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace gptc::gptrun {

struct Example {
  std::vector<int32_t> context;
  std::vector<std::vector<int32_t>> endings;
  int label = 0;
};

/// Reads a HellaSwag-format jsonl (the first `limit` examples; 0: all).
/// Errors give the file and line.
StatusOr<std::vector<Example>> loadMultipleChoice(const std::string &path,
                                                  data::Tokenizer &tokenizer, int64_t limit = 0);

/// One candidate as a row of at most `seq` tokens: the context's last
/// tokens, then the ending, which starts at `endingStart` (>= 1).
struct Row {
  std::vector<int32_t> tokens;
  size_t endingStart = 0;
  bool truncated = false; // context tokens were dropped
};
StatusOr<Row> packRow(const std::vector<int32_t> &context, const std::vector<int32_t> &ending,
                      int64_t seq);

/// The cross-entropy of the row's ending tokens given the logits of its
/// positions (row-major, `paddedVocab` columns, the first `vocab` used):
/// the sum over ending tokens, and their count.
struct EndingLoss {
  double sum = 0;
  int64_t tokens = 0;
  double mean() const { return tokens ? sum / double(tokens) : 0; }
};
EndingLoss endingLoss(const float *logits, int64_t paddedVocab, int64_t vocab, const Row &row);

struct EvalResult {
  int64_t examples = 0, correctNorm = 0, correctSum = 0, truncatedRows = 0;
};

/// The whole of `gptrun --eval FILE`: parameters as for --sample
/// (--init-from, --resume, or @init with a warning), the result line to
/// `out`, notes to `log`.
StatusOr<EvalResult> evaluate(const Options &options, std::FILE *out = stdout,
                              std::FILE *log = stderr);

} // namespace gptc::gptrun

#endif // GPTC_TOOLS_GPTRUN_EVAL_H

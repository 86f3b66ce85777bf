//===- Gpt2Weights.h - GPT-2 weights from and to Hugging Face and llm.c ---===//
//
// gptc's parameters are named and laid out as in models/gpt2.mlir: "wte"
// (Vp, C) with the vocabulary padded to Vp, "wpe" (maxT, C),
// "h.<i>.attn.c_attn.weight" (3C, C), ... "ln_f.bias" (C), weights in
// torch.nn.Linear's (out, in) layout, all F32 (the master copy).
//
// Hugging Face's GPT2LMHeadModel names them "transformer.wte.weight",
// "transformer.h.<i>.attn.c_attn.weight", ... (GPT2Model files drop the
// "transformer." prefix; both are read), stores its Conv1D weights (in,
// out), i.e. transposed, and the vocabulary unpadded (V rows). The LM head
// is tied to wte: "lm_head.weight", when present, must equal it; the
// attention-mask buffers "attn.bias" / "attn.masked_bias" are ignored.
//
// llm.c's checkpoint (gpt2_124M.bin) is 256 int32 of header (magic
// 20240326, version 3 = fp32 or 5 = bf16, maxT, V, L, NH, C, Vp), then
// every tensor in (out, in) layout, concatenated in llm.c's order: wte
// (Vp rows), wpe, then each kind for all layers (ln_1.weight of every
// layer, ln_1.bias, c_attn.weight, ...), ln_f.weight, ln_f.bias.
//
// A file of another model size, a missing or misshapen tensor, an extra
// tensor or a truncated file is an error naming the file and the tensor;
// nothing is loaded until everything has been read and checked.
//
//===----------------------------------------------------------------------===//

#ifndef GPTC_RUNTIME_CHECKPOINT_GPT2WEIGHTS_H
#define GPTC_RUNTIME_CHECKPOINT_GPT2WEIGHTS_H

#include "runtime/checkpoint/Checkpoint.h"

#include <cstdint>
#include <string>
#include <vector>

namespace gptc {

class Session;

namespace gpt2 {

/// A GPT-2's hyperparameters: what a weight file must match.
struct Config {
  std::string name; // the executable's model name ("124M", "mini"), or ""
  int64_t nLayer = 0, nHead = 0, nEmbd = 0;
  int64_t vocab = 0, paddedVocab = 0, maxT = 0;
  /// checkpoint::executableIdentity and describeModel of the executable
  /// (0, "" when unknown): a gptc checkpoint must be of the same model.
  uint64_t identity = 0;
  std::string model;
  /// "n_layer=12, n_head=12, n_embd=768, vocab_size=50257, n_positions=1024
  /// (GPT-2 124M)"; n_head is left out when 0 (unknown).
  std::string describe() const;
};

/// The executable's config (model config and wte's padded rows). Errors
/// when it is not a GPT-2 (no wte, no n_layer, ...).
StatusOr<Config> configOf(const schema::Executable &exe);

/// gptc's parameters, F32, in the layout and order of `config`.
using Weights = std::vector<checkpoint::Tensor>;

/// Reads `path` into gptc's layout for `target`:
///   - a directory with model.safetensors (and config.json, checked);
///   - a .safetensors file;
///   - an llm.c .bin (magic 20240326, version 3 or 5);
///   - a gptc checkpoint (GPTCCKPT) of the same model (its parameters).
/// BF16/F16 files are widened to F32 exactly.
StatusOr<Weights> importWeights(const std::string &path, const Config &target);

/// Writes `weights` into the session's Parameter tensors, after checking
/// that every Parameter is there with its dtype and shape.
Status loadParameters(Session &session, const Weights &weights, const std::string &origin);

/// gptrun --init-from: importWeights for the session's executable, then
/// loadParameters. Nothing is written unless everything checks.
Status initFrom(Session &session, const std::string &path);

/// The parameters of a gptc checkpoint, checked against `config`: the
/// same model, though perhaps compiled for another batch, T or rank count.
StatusOr<Weights> parametersOf(const checkpoint::Checkpoint &ckpt, const Config &config,
                               const std::string &origin);

/// A Hugging Face GPT-2 directory: `dir`/model.safetensors (F32, no
/// padding, Conv1D layout) and `dir`/config.json, each written atomically.
Status exportHuggingFace(const std::string &dir, const Weights &weights, const Config &config);
/// The config.json text for `config`.
std::string huggingFaceConfig(const Config &config);
/// An llm.c checkpoint: version 3 (fp32) or, with `bf16`, version 5
/// (rounded to nearest even), written atomically.
Status exportLlmc(const std::string &path, const Weights &weights, const Config &config, bool bf16);

} // namespace gpt2
} // namespace gptc

#endif // GPTC_RUNTIME_CHECKPOINT_GPT2WEIGHTS_H

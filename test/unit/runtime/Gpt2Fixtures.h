//===- Gpt2Fixtures.h - GPT-2 weights and executables for runtime tests ---===//
//
// A `tiny`-shaped GPT-2 config, a seeded Hugging Face state dict for it
// (Conv1D layout, unpadded vocabulary) written as transformers writes it,
// and a hand-built executable holding exactly gptc's parameters of it.
//
//===----------------------------------------------------------------------===//

#ifndef GPTC_TEST_UNIT_RUNTIME_GPT2FIXTURES_H
#define GPTC_TEST_UNIT_RUNTIME_GPT2FIXTURES_H

#include "runtime/checkpoint/Gpt2Weights.h"
#include "runtime/checkpoint/Safetensors.h"
#include "runtime/support/FileIO.h"
#include "test/unit/runtime/ExecutableBuilder.h"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

namespace gptc::testing {

using gpt2::Config;
using safetensors::DType;

inline Config tiny() {
  Config c;
  c.nLayer = 2;
  c.nHead = 2;
  c.nEmbd = 16;
  c.vocab = 60;
  c.paddedVocab = 64;
  c.maxT = 16;
  return c;
}

/// A Hugging Face GPT2LMHeadModel state dict: name -> (shape, values).
struct HfTensor {
  std::vector<int64_t> shape;
  std::vector<float> values;
};

using HfModel = std::map<std::string, HfTensor>;

inline HfModel hfModel(const Config &c, uint32_t seed = 1) {
  HfModel m;
  uint32_t state = seed;
  auto add = [&](const std::string &name, std::vector<int64_t> shape) {
    HfTensor t{shape, {}};
    int64_t n = 1;
    for (int64_t d : shape)
      n *= d;
    for (int64_t i = 0; i < n; ++i) {
      state = state * 1664525u + 1013904223u;
      // k/64 with |k| < 128: exact in bf16, so bf16 files hold the same values.
      t.values.push_back(float(int32_t(state >> 8) % 255 - 127) / 64.0f);
    }
    m["transformer." + name] = std::move(t);
  };
  int64_t C = c.nEmbd;
  add("wte.weight", {c.vocab, C});
  add("wpe.weight", {c.maxT, C});
  for (int64_t l = 0; l < c.nLayer; ++l) {
    std::string h = "h." + std::to_string(l) + ".";
    add(h + "ln_1.weight", {C});
    add(h + "ln_1.bias", {C});
    add(h + "attn.c_attn.weight", {C, 3 * C}); // Conv1D: (in, out)
    add(h + "attn.c_attn.bias", {3 * C});
    add(h + "attn.c_proj.weight", {C, C});
    add(h + "attn.c_proj.bias", {C});
    add(h + "ln_2.weight", {C});
    add(h + "ln_2.bias", {C});
    add(h + "mlp.c_fc.weight", {C, 4 * C});
    add(h + "mlp.c_fc.bias", {4 * C});
    add(h + "mlp.c_proj.weight", {4 * C, C});
    add(h + "mlp.c_proj.bias", {C});
  }
  add("ln_f.weight", {C});
  add("ln_f.bias", {C});
  return m;
}

/// Writes `m` as model.safetensors (F32, format "pt", as transformers
/// does) and, unless `configJson` is empty, config.json into `dir`.
inline void writeHf(const std::string &dir, const HfModel &m, const std::string &configJson) {
  std::vector<safetensors::TensorRef> refs;
  for (const auto &[name, t] : m)
    refs.push_back({name, DType::F32, t.shape, t.values.data(), t.values.size() * 4});
  ASSERT_TRUE(safetensors::write(dir + "/model.safetensors", refs, {{"format", "pt"}}));
  if (!configJson.empty()) {
    ASSERT_TRUE(writeFileAtomically(dir + "/config.json", configJson));
  }
}

/// An executable holding exactly the parameters of `c` (and a moment).
inline ExecutableSpec gpt2Spec(const Config &c) {
  ExecutableSpec e;
  e.modelName = "tiny";
  e.config = {{"n_layer", c.nLayer}, {"n_head", c.nHead}, {"n_embd", c.nEmbd},
              {"vocab_size", c.vocab}, {"block_size", c.maxT}};
  uint32_t params = e.addPool("params", 1 << 20), state = e.addPool("state", 1 << 16);
  uint64_t offset = 0;
  auto add = [&](const std::string &name, std::vector<int64_t> shape) {
    e.addTensor(name, s::TensorRole::Parameter, s::DType::F32, shape, params, offset);
    int64_t n = 1;
    for (int64_t d : shape)
      n *= d;
    offset += (uint64_t(n) * 4 + 255) / 256 * 256;
  };
  int64_t C = c.nEmbd;
  add("wte", {c.paddedVocab, C});
  add("wpe", {c.maxT, C});
  for (int64_t l = 0; l < c.nLayer; ++l) {
    std::string h = "h." + std::to_string(l) + ".";
    add(h + "ln_1.weight", {C});
    add(h + "ln_1.bias", {C});
    add(h + "attn.c_attn.weight", {3 * C, C});
    add(h + "attn.c_attn.bias", {3 * C});
    add(h + "attn.c_proj.weight", {C, C});
    add(h + "attn.c_proj.bias", {C});
    add(h + "ln_2.weight", {C});
    add(h + "ln_2.bias", {C});
    add(h + "mlp.c_fc.weight", {4 * C, C});
    add(h + "mlp.c_fc.bias", {4 * C});
    add(h + "mlp.c_proj.weight", {C, 4 * C});
    add(h + "mlp.c_proj.bias", {C});
  }
  add("ln_f.weight", {C});
  add("ln_f.bias", {C});
  e.addTensor("ln_f.bias.adam_m", s::TensorRole::OptimizerState, s::DType::F32, {C}, state, 0);
  return e;
}

} // namespace gptc::testing

#endif // GPTC_TEST_UNIT_RUNTIME_GPT2FIXTURES_H

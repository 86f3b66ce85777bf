//===- Gpt2WeightsTest.cpp - GPT-2 weights from and to HF and llm.c -------===//
//
// A `tiny`-shaped GPT-2 (2 layers, 2 heads, width 16, vocabulary 60 padded
// to 64, context 16) written the way Hugging Face and llm.c write it, read
// into gptc's layout, and written back.
//
//===----------------------------------------------------------------------===//

#include "runtime/checkpoint/Gpt2Weights.h"
#include "runtime/checkpoint/Safetensors.h"
#include "runtime/executor/HostBackend.h"
#include "runtime/executor/Session.h"
#include "runtime/support/FileIO.h"
#include "test/unit/ScratchDir.h"
#include "test/unit/runtime/ExecutableBuilder.h"
#include "test/unit/runtime/Gpt2Fixtures.h"

#include <gtest/gtest.h>

#include <cstring>
#include <map>

using namespace gptc;
using namespace gptc::testing;

namespace {

#define EXPECT_HAS(haystack, needle)                                                           \
  EXPECT_NE(std::string(haystack).find(needle), std::string::npos) << (haystack)

checkpoint::Tensor *find(gpt2::Weights &w, const std::string &name) {
  for (checkpoint::Tensor &t : w)
    if (t.name == name)
      return &t;
  return nullptr;
}

float at(const checkpoint::Tensor &t, size_t i) {
  float f;
  std::memcpy(&f, t.bytes.data() + 4 * i, 4);
  return f;
}

std::string slurp(const std::string &path) {
  StatusOr<std::string> s = readFile(path);
  EXPECT_TRUE(s) << s.status().message();
  return s ? *s : "";
}

class Gpt2WeightsTest : public ::testing::Test {
protected:
  std::string path(const std::string &name) const { return (scratch.path() / name).string(); }
  std::string hfDir(const HfModel &m, const std::string &configJson) {
    std::string dir = path("hf" + std::to_string(dirs++));
    std::filesystem::create_directories(dir);
    writeHf(dir, m, configJson);
    return dir;
  }
  std::string importError(const std::string &p, const Config &target = tiny()) {
    StatusOr<gpt2::Weights> w = gpt2::importWeights(p, target);
    EXPECT_FALSE(w) << "imported " << p;
    return w ? "" : w.status().message();
  }
  ScratchDir scratch{"gpt2-weights"};
  int dirs = 0;
};

TEST_F(Gpt2WeightsTest, ImportsHuggingFaceLayout) {
  Config c = tiny();
  HfModel m = hfModel(c);
  StatusOr<gpt2::Weights> w = gpt2::importWeights(hfDir(m, gpt2::huggingFaceConfig(c)), c);
  ASSERT_TRUE(w) << w.status().message();
  EXPECT_EQ(w->size(), 2 + 12 * 2 + 2u);
  for (const checkpoint::Tensor &t : *w) {
    EXPECT_EQ(t.role, schema::TensorRole::Parameter);
    EXPECT_EQ(t.dtype, schema::DType::F32);
  }

  // wte: V rows from the file, the padding rows zero.
  const checkpoint::Tensor *wte = find(*w, "wte");
  ASSERT_TRUE(wte);
  EXPECT_EQ(wte->shape, (std::vector<int64_t>{64, 16}));
  const HfTensor &hwte = m["transformer.wte.weight"];
  EXPECT_EQ(std::memcmp(wte->bytes.data(), hwte.values.data(), 60 * 16 * 4), 0);
  for (size_t i = 60 * 16; i < 64 * 16; ++i)
    ASSERT_EQ(at(*wte, i), 0.0f) << i;

  // Conv1D weights are transposed into (out, in).
  for (const char *name : {"h.1.attn.c_attn.weight", "h.0.attn.c_proj.weight",
                           "h.1.mlp.c_fc.weight", "h.0.mlp.c_proj.weight"}) {
    const checkpoint::Tensor *t = find(*w, name);
    const HfTensor &h = m["transformer." + std::string(name)];
    ASSERT_TRUE(t) << name;
    ASSERT_EQ(t->shape, (std::vector<int64_t>{h.shape[1], h.shape[0]})) << name;
    int64_t rows = t->shape[0], cols = t->shape[1];
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t k = 0; k < cols; ++k)
        ASSERT_EQ(at(*t, size_t(r * cols + k)), h.values[size_t(k * rows + r)]) << name;
  }
  // Vectors and wpe as they are.
  for (const char *name : {"wpe", "h.1.attn.c_attn.bias", "h.0.ln_2.weight", "ln_f.bias"}) {
    const checkpoint::Tensor *t = find(*w, name);
    std::string hf = std::string("transformer.") + name + (name == std::string("wpe") ? ".weight" : "");
    ASSERT_TRUE(t) << name;
    EXPECT_EQ(std::memcmp(t->bytes.data(), m[hf].values.data(), t->bytes.size()), 0) << name;
  }
}

TEST_F(Gpt2WeightsTest, HuggingFaceExportRoundTripsByteExactly) {
  Config c = tiny();
  std::string in = hfDir(hfModel(c), gpt2::huggingFaceConfig(c));
  StatusOr<gpt2::Weights> w = gpt2::importWeights(in, c);
  ASSERT_TRUE(w) << w.status().message();
  std::string out = path("exported");
  ASSERT_TRUE(gpt2::exportHuggingFace(out, *w, c));
  EXPECT_EQ(slurp(out + "/model.safetensors"), slurp(in + "/model.safetensors"));
  std::string config = slurp(out + "/config.json");
  for (const char *key : {"\"n_embd\": 16", "\"n_layer\": 2", "\"n_head\": 2", "\"n_positions\": 16",
                          "\"n_ctx\": 16", "\"vocab_size\": 60", "\"layer_norm_epsilon\": 1e-05",
                          "\"activation_function\": \"gelu_new\"",
                          "\"architectures\": [\"GPT2LMHeadModel\"]", "\"model_type\": \"gpt2\""})
    EXPECT_HAS(config, key);
  // And back in: the same parameters.
  StatusOr<gpt2::Weights> again = gpt2::importWeights(out, c);
  ASSERT_TRUE(again) << again.status().message();
  ASSERT_EQ(again->size(), w->size());
  for (size_t i = 0; i < w->size(); ++i)
    EXPECT_EQ((*again)[i].bytes, (*w)[i].bytes) << (*w)[i].name;
}

TEST_F(Gpt2WeightsTest, ReadsGpt2ModelNamesBf16TiedHeadAndMaskBuffers) {
  Config c = tiny();
  HfModel m = hfModel(c);
  std::map<std::string, std::vector<uint16_t>> halves;
  std::vector<safetensors::TensorRef> refs;
  for (const auto &[name, t] : m) {
    std::vector<uint16_t> &h = halves[name];
    for (float f : t.values) {
      uint32_t bits;
      std::memcpy(&bits, &f, 4);
      h.push_back(uint16_t(bits >> 16)); // the test's values are exact in bf16
    }
    // GPT2Model's names: no "transformer." prefix.
    refs.push_back({name.substr(12), DType::BF16, t.shape, h.data(), h.size() * 2});
  }
  std::vector<uint16_t> &wte = halves["transformer.wte.weight"];
  refs.push_back({"lm_head.weight", DType::BF16, {60, 16}, wte.data(), wte.size() * 2});
  std::vector<float> mask(16 * 16, 1.0f);
  refs.push_back({"h.0.attn.bias", DType::F32, {1, 1, 16, 16}, mask.data(), mask.size() * 4});
  refs.push_back({"h.1.attn.masked_bias", DType::F32, {}, mask.data(), 4});
  std::string file = path("gpt2.safetensors");
  ASSERT_TRUE(safetensors::write(file, refs, {{"format", "pt"}}));

  StatusOr<gpt2::Weights> w = gpt2::importWeights(file, c);
  ASSERT_TRUE(w) << w.status().message();
  const checkpoint::Tensor *lnf = find(*w, "ln_f.weight");
  ASSERT_TRUE(lnf);
  EXPECT_EQ(std::memcmp(lnf->bytes.data(), m["transformer.ln_f.weight"].values.data(), 64), 0);

  // An LM head that is not wte cannot be represented.
  refs[refs.size() - 3].data = halves["transformer.h.0.mlp.c_fc.weight"].data(); // same size
  std::string untied = path("untied.safetensors");
  ASSERT_TRUE(safetensors::write(untied, refs, {}));
  EXPECT_HAS(importError(untied), "tensor 'lm_head.weight' differs from 'wte.weight': gptc ties");
}

TEST_F(Gpt2WeightsTest, LlmcRoundTripsFp32AndBf16) {
  Config c = tiny();
  StatusOr<gpt2::Weights> w = gpt2::importWeights(hfDir(hfModel(c), ""), c);
  ASSERT_TRUE(w) << w.status().message();
  std::string bin = path("gpt2_tiny.bin");
  ASSERT_TRUE(gpt2::exportLlmc(bin, *w, c, false));
  std::string bytes = slurp(bin);
  // 256 int32 of header, then every parameter.
  int64_t params = 0;
  for (const checkpoint::Tensor &t : *w)
    params += int64_t(t.bytes.size() / 4);
  ASSERT_EQ(bytes.size(), 1024 + 4 * size_t(params));
  int32_t h[8];
  std::memcpy(h, bytes.data(), sizeof(h));
  EXPECT_EQ(std::vector<int32_t>(h, h + 8), (std::vector<int32_t>{20240326, 3, 16, 60, 2, 2, 16, 64}));
  // llm.c's order: wte, wpe, then ln_1.weight of every layer, ...
  float first;
  std::memcpy(&first, bytes.data() + 1024 + 4 * (64 * 16 + 16 * 16), 4);
  EXPECT_EQ(first, at(*find(*w, "h.0.ln_1.weight"), 0));
  std::memcpy(&first, bytes.data() + 1024 + 4 * (64 * 16 + 16 * 16 + 16), 4);
  EXPECT_EQ(first, at(*find(*w, "h.1.ln_1.weight"), 0));

  StatusOr<gpt2::Weights> back = gpt2::importWeights(bin, c);
  ASSERT_TRUE(back) << back.status().message();
  std::string bin2 = path("again.bin");
  ASSERT_TRUE(gpt2::exportLlmc(bin2, *back, c, false));
  EXPECT_EQ(slurp(bin2), bytes);

  // bf16: version 5, round to nearest even.
  gpt2::Weights rounded = *w;
  float probes[] = {1.00390625f /* 1 + 2^-8: a tie, to 1 */,
                    1.01171875f /* 1 + 3*2^-8: a tie, to 1 + 2^-6 */, 1.0f + 1.0f / 4096};
  std::memcpy(find(rounded, "ln_f.bias")->bytes.data(), probes, sizeof(probes));
  std::string bf = path("gpt2_tiny_bf16.bin");
  ASSERT_TRUE(gpt2::exportLlmc(bf, rounded, c, true));
  std::string bfBytes = slurp(bf);
  ASSERT_EQ(bfBytes.size(), 1024 + 2 * size_t(params));
  EXPECT_EQ(bfBytes[4], 5);
  StatusOr<gpt2::Weights> fromBf = gpt2::importWeights(bf, c);
  ASSERT_TRUE(fromBf) << fromBf.status().message();
  const checkpoint::Tensor *lnfb = find(*fromBf, "ln_f.bias");
  EXPECT_EQ(at(*lnfb, 0), 1.0f);
  EXPECT_EQ(at(*lnfb, 1), 1.015625f);
  EXPECT_EQ(at(*lnfb, 2), 1.0f);
  // The test's other values are exact in bf16.
  EXPECT_EQ(find(*fromBf, "h.1.mlp.c_fc.weight")->bytes, find(*w, "h.1.mlp.c_fc.weight")->bytes);
}

TEST_F(Gpt2WeightsTest, LlmcPaddingOfAnotherWidthKeepsTheVocabulary) {
  Config c = tiny();
  StatusOr<gpt2::Weights> w = gpt2::importWeights(hfDir(hfModel(c), ""), c);
  ASSERT_TRUE(w);
  // Written with Vp = 128 (a file padded to another multiple), read as 64.
  Config wide = c;
  wide.paddedVocab = 128;
  gpt2::Weights widened = *w;
  checkpoint::Tensor &wte = *std::find_if(widened.begin(), widened.end(),
                                          [](auto &t) { return t.name == "wte"; });
  wte.shape[0] = 128;
  wte.bytes.resize(128 * 16 * 4, 0);
  std::string bin = path("wide.bin");
  ASSERT_TRUE(gpt2::exportLlmc(bin, widened, wide, false));
  StatusOr<gpt2::Weights> back = gpt2::importWeights(bin, c);
  ASSERT_TRUE(back) << back.status().message();
  EXPECT_EQ(find(*back, "wte")->bytes, find(*w, "wte")->bytes);
}

TEST_F(Gpt2WeightsTest, RejectsMissingExtraAndMisshapenTensors) {
  Config c = tiny();
  HfModel missing = hfModel(c);
  missing.erase("transformer.h.1.ln_2.bias");
  EXPECT_HAS(importError(hfDir(missing, "")), "model.safetensors: no tensor 'transformer.h.1.ln_2.bias'");

  HfModel extra = hfModel(c);
  extra["transformer.h.0.attn.rotary"] = {{2}, {0, 0}};
  EXPECT_HAS(importError(hfDir(extra, "")), "unexpected tensor 'transformer.h.0.attn.rotary'");

  HfModel misshapen = hfModel(c);
  misshapen["transformer.h.0.attn.c_proj.bias"] = {{17}, std::vector<float>(17)};
  EXPECT_HAS(importError(hfDir(misshapen, "")),
             "tensor 'transformer.h.0.attn.c_proj.bias' is (17), expected (16)");

  // Stored in gptc's (out, in) layout instead of Conv1D's: the shape says so.
  HfModel linear = hfModel(c);
  linear["transformer.h.1.mlp.c_fc.weight"].shape = {64, 16};
  EXPECT_HAS(importError(hfDir(linear, "")),
             "tensor 'transformer.h.1.mlp.c_fc.weight' is (64, 16), expected (16, 64)");

  EXPECT_HAS(importError(path("nowhere")), "nowhere: cannot open");
  std::filesystem::create_directories(path("empty"));
  EXPECT_HAS(importError(path("empty")), "empty: a directory without model.safetensors");
}

TEST_F(Gpt2WeightsTest, RejectsAModelOfAnotherSize) {
  Config three = tiny();
  three.nLayer = 3;
  std::string e = importError(hfDir(hfModel(three), ""));
  EXPECT_HAS(e, "holds a GPT-2 with n_layer=3, n_embd=16, vocab_size=60, n_positions=16, but the "
                "executable's model is n_layer=2, n_head=2, n_embd=16");

  Config vocab = tiny();
  vocab.vocab = 50;
  EXPECT_HAS(importError(hfDir(hfModel(vocab), "")), "vocab_size=50");

  // The sizes are named: GPT-2 124M's file against mini's executable.
  Config small;
  small.nLayer = 12;
  small.nHead = 12;
  small.nEmbd = 768;
  small.vocab = 50257;
  small.maxT = 1024;
  EXPECT_EQ(small.describe(),
            "n_layer=12, n_head=12, n_embd=768, vocab_size=50257, n_positions=1024 (GPT-2 124M)");
  small.name = "mini";
  EXPECT_HAS(small.describe(), "('mini')");

  // llm.c: the header says which model it is.
  Config c = tiny();
  StatusOr<gpt2::Weights> w = gpt2::importWeights(hfDir(hfModel(c), ""), c);
  ASSERT_TRUE(w);
  std::string bin = path("tiny.bin");
  ASSERT_TRUE(gpt2::exportLlmc(bin, *w, c, false));
  Config wider = tiny();
  wider.nHead = 4;
  EXPECT_HAS(importError(bin, wider), "holds a GPT-2 with n_layer=2, n_head=2");
}

TEST_F(Gpt2WeightsTest, ChecksConfigJson) {
  Config c = tiny();
  std::string config = gpt2::huggingFaceConfig(c);
  auto replaced = [&](const std::string &from, const std::string &to) {
    std::string s = config;
    s.replace(s.find(from), from.size(), to);
    return s;
  };
  EXPECT_HAS(importError(hfDir(hfModel(c), replaced("\"n_head\": 2", "\"n_head\": 4"))),
             "holds a GPT-2 with n_layer=2, n_head=4");
  EXPECT_HAS(importError(hfDir(hfModel(c), replaced("\"n_positions\": 16", "\"n_positions\": 32"))),
             "config.json says n_positions=32, the tensors have 16");
  EXPECT_HAS(importError(hfDir(hfModel(c), replaced("gelu_new", "relu"))),
             "config.json: activation_function is \"relu\"");
  EXPECT_HAS(importError(hfDir(hfModel(c), replaced("1e-05", "1e-06"))), "layer_norm_epsilon");
  EXPECT_HAS(importError(hfDir(hfModel(c), replaced("\"tie_word_embeddings\": true",
                                                    "\"tie_word_embeddings\": false"))),
             "tie_word_embeddings is false");
  EXPECT_HAS(importError(hfDir(hfModel(c), "{\"n_head\": ")), "config.json: line 1");
}

TEST_F(Gpt2WeightsTest, RejectsBrokenLlmcFiles) {
  Config c = tiny();
  StatusOr<gpt2::Weights> w = gpt2::importWeights(hfDir(hfModel(c), ""), c);
  ASSERT_TRUE(w);
  std::string bin = path("tiny.bin");
  ASSERT_TRUE(gpt2::exportLlmc(bin, *w, c, false));
  std::string bytes = slurp(bin);

  // Cut inside the second layer's ln_2.bias... and anywhere else: the tensor is named.
  size_t lnfStart = bytes.size() - 2 * 16 * 4;
  ASSERT_TRUE(writeFileAtomically(path("cut.bin"), bytes.substr(0, lnfStart + 8)));
  EXPECT_HAS(importError(path("cut.bin")), "cut.bin: truncated: tensor 'ln_f.weight' (16) needs bytes");
  ASSERT_TRUE(writeFileAtomically(path("header.bin"), bytes.substr(0, 100)));
  EXPECT_HAS(importError(path("header.bin")), "truncated llm.c checkpoint (100 bytes");
  ASSERT_TRUE(writeFileAtomically(path("long.bin"), bytes + "xyzw"));
  EXPECT_HAS(importError(path("long.bin")), "4 unexpected bytes after the last tensor (ln_f.bias)");

  std::string v1 = bytes;
  v1[4] = 1;
  ASSERT_TRUE(writeFileAtomically(path("v1.bin"), v1));
  EXPECT_HAS(importError(path("v1.bin")), "llm.c checkpoint version 1: gptc reads 3 (fp32) and 5 (bf16)");
  std::string zero = bytes;
  std::memset(&zero[8], 0, 4); // maxT = 0
  ASSERT_TRUE(writeFileAtomically(path("zero.bin"), zero));
  EXPECT_HAS(importError(path("zero.bin")), "non-positive size");
}

TEST_F(Gpt2WeightsTest, LoadsIntoASessionAllOrNothing) {
  Config c = tiny();
  StatusOr<Executable> exe = Executable::loadBytes(gpt2Spec(c).build(), "tiny.fb");
  ASSERT_TRUE(exe) << exe.status().message();
  StatusOr<Config> fromExe = gpt2::configOf(exe->get());
  ASSERT_TRUE(fromExe) << fromExe.status().message();
  EXPECT_EQ(fromExe->describe(), "n_layer=2, n_head=2, n_embd=16, vocab_size=60, n_positions=16 ('tiny')");
  EXPECT_EQ(fromExe->paddedVocab, 64);
  StatusOr<std::unique_ptr<Session>> session = Session::create(std::move(*exe), createHostBackend);
  ASSERT_TRUE(session) << session.status().message();
  Session &sess = **session;

  HfModel m = hfModel(c);
  std::string dir = hfDir(m, gpt2::huggingFaceConfig(c));
  ASSERT_TRUE(gpt2::initFrom(sess, dir));
  StatusOr<gpt2::Weights> w = gpt2::importWeights(dir, c);
  ASSERT_TRUE(w);
  for (const checkpoint::Tensor &t : *w) {
    StatusOr<uint32_t> index = sess.findTensor(t.name);
    ASSERT_TRUE(index) << t.name;
    std::vector<uint8_t> got(t.bytes.size());
    ASSERT_TRUE(sess.readTensor(*index, got.data(), got.size()));
    EXPECT_EQ(got, t.bytes) << t.name;
  }

  // A file missing a tensor leaves every parameter as it was.
  HfModel other = hfModel(c, 7);
  other.erase("transformer.ln_f.bias");
  std::string e = gpt2::initFrom(sess, hfDir(other, "")).message();
  EXPECT_HAS(e, "--init-from: ");
  EXPECT_HAS(e, "no tensor 'transformer.ln_f.bias'");
  StatusOr<uint32_t> wte = sess.findTensor("wte");
  std::vector<uint8_t> got(64 * 16 * 4);
  ASSERT_TRUE(sess.readTensor(*wte, got.data(), got.size()));
  EXPECT_EQ(got, find(*w, "wte")->bytes);

  // Weights that miss one of the executable's parameters are refused whole.
  gpt2::Weights partial = *w;
  partial.pop_back();
  EXPECT_HAS(gpt2::loadParameters(sess, partial, "x").message(),
             "x: nothing for the executable's parameter 'ln_f.bias'");

  // Another model's executable is refused for a gptc checkpoint of this one.
  checkpoint::Checkpoint ckpt;
  ckpt.identity = 42;
  ckpt.model = "model 'tiny' (batch=2, block_size=16, n_embd=16, n_head=4, n_layer=2, seq=8, "
               "vocab_size=60), 28 parameter and 56 state tensors";
  for (const checkpoint::Tensor &t : *w)
    ckpt.tensors.push_back(t);
  Config withIdentity = c;
  withIdentity.identity = 43;
  withIdentity.model = "model 'tiny' (n_head=2, ...)";
  StatusOr<gpt2::Weights> p = gpt2::parametersOf(ckpt, withIdentity, "c.ckpt");
  ASSERT_FALSE(p);
  EXPECT_HAS(p.status().message(), "c.ckpt is a checkpoint of model 'tiny' (batch=2");
  EXPECT_HAS(p.status().message(), "but the executable is model 'tiny' (n_head=2, ...)");
  // The same model compiled for another batch and T: its parameters are taken.
  ckpt.model = "model 'tiny' (batch=4, block_size=16, n_embd=16, n_head=2, n_layer=2, seq=16, "
               "vocab_size=60), 28 parameter and 56 state tensors";
  p = gpt2::parametersOf(ckpt, withIdentity, "c.ckpt");
  ASSERT_TRUE(p) << p.status().message();
  EXPECT_EQ(p->size(), w->size());
}

} // namespace

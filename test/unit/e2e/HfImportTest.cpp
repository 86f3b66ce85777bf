//===- HfImportTest.cpp - Hugging Face weights through a compiled model ---===//
//
// A random GPT-2 in Hugging Face's layout (Conv1D weights (in, out),
// unpadded vocabulary) goes into the `tiny` Host executable through
// gpt2::initFrom; @forward's loss and @logits then equal an fp64 forward
// written here the way transformers' GPT2LMHeadModel computes it, on the
// file's own tensors. A wrong transpose, a shifted padding row or a
// misnamed tensor changes the loss far beyond the tolerance (1e-5
// relative: fp32 against fp64 over two layers). Then the session's
// parameters, exported, are the imported file byte for byte. And gptrun's
// Trainer with --init-from starts from them: its first step's loss is
// @forward's on the same batch.
//
//===----------------------------------------------------------------------===//

#include "TestUtils.h"

#include "compiler/Codegen/EmitExecutable.h"
#include "runtime/checkpoint/Gpt2Weights.h"
#include "runtime/checkpoint/Safetensors.h"
#include "runtime/data/TokenFile.h"
#include "runtime/executor/HostBackend.h"
#include "runtime/executor/Session.h"
#include "runtime/support/FileIO.h"
#include "test/unit/ScratchDir.h"
#include "tools/gptrun/Trainer.h"

#include <cstring>
#include <random>

using namespace gptc;
using namespace gptc::testing;

namespace {

constexpr int64_t L = 2, H = 2, C = 16, V = 60, maxT = 16;

using HfModel = std::map<std::string, std::pair<std::vector<int64_t>, std::vector<float>>>;

/// GPT-2-like random weights: N(0, 0.2) matrices and biases, LayerNorm
/// weights near 1, so that every tensor matters to the loss.
HfModel randomModel(uint32_t seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> normal(0.0f, 0.2f);
  HfModel m;
  auto add = [&](const std::string &name, std::vector<int64_t> shape, float base = 0) {
    int64_t n = 1;
    for (int64_t d : shape)
      n *= d;
    std::vector<float> v(static_cast<size_t>(n));
    for (float &x : v)
      x = base + normal(gen);
    m["transformer." + name] = {shape, v};
  };
  add("wte.weight", {V, C});
  add("wpe.weight", {maxT, C});
  for (int64_t l = 0; l < L; ++l) {
    std::string h = "h." + std::to_string(l) + ".";
    add(h + "ln_1.weight", {C}, 1);
    add(h + "ln_1.bias", {C});
    add(h + "attn.c_attn.weight", {C, 3 * C});
    add(h + "attn.c_attn.bias", {3 * C});
    add(h + "attn.c_proj.weight", {C, C});
    add(h + "attn.c_proj.bias", {C});
    add(h + "ln_2.weight", {C}, 1);
    add(h + "ln_2.bias", {C});
    add(h + "mlp.c_fc.weight", {C, 4 * C});
    add(h + "mlp.c_fc.bias", {4 * C});
    add(h + "mlp.c_proj.weight", {4 * C, C});
    add(h + "mlp.c_proj.bias", {C});
  }
  add("ln_f.weight", {C}, 1);
  add("ln_f.bias", {C});
  return m;
}

using Mat = std::vector<double>; // row-major (T, n)

/// x (T, in) @ w (in, out) + b: transformers' Conv1D.
Mat conv1d(const Mat &x, int64_t T, const std::vector<float> &w, const std::vector<float> &b,
           int64_t in, int64_t out) {
  Mat y(size_t(T * out));
  for (int64_t t = 0; t < T; ++t)
    for (int64_t o = 0; o < out; ++o) {
      double s = b[size_t(o)];
      for (int64_t i = 0; i < in; ++i)
        s += x[size_t(t * in + i)] * w[size_t(i * out + o)];
      y[size_t(t * out + o)] = s;
    }
  return y;
}

Mat layerNorm(const Mat &x, int64_t T, const std::vector<float> &g, const std::vector<float> &b) {
  Mat y(x.size());
  for (int64_t t = 0; t < T; ++t) {
    double mean = 0, var = 0;
    for (int64_t c = 0; c < C; ++c)
      mean += x[size_t(t * C + c)] / C;
    for (int64_t c = 0; c < C; ++c)
      var += (x[size_t(t * C + c)] - mean) * (x[size_t(t * C + c)] - mean) / C;
    for (int64_t c = 0; c < C; ++c)
      y[size_t(t * C + c)] = (x[size_t(t * C + c)] - mean) / std::sqrt(var + 1e-5) * g[size_t(c)] +
                             b[size_t(c)];
  }
  return y;
}

/// GPT2LMHeadModel's logits (T, V) for one row of tokens.
Mat hfLogits(HfModel &m, const int32_t *tokens, int64_t T) {
  auto w = [&](const std::string &n) -> const std::vector<float> & {
    return m.at("transformer." + n).second;
  };
  Mat x(size_t(T * C));
  for (int64_t t = 0; t < T; ++t)
    for (int64_t c = 0; c < C; ++c)
      x[size_t(t * C + c)] = double(w("wte.weight")[size_t(tokens[t] * C + c)]) +
                             w("wpe.weight")[size_t(t * C + c)];
  const int64_t hd = C / H;
  for (int64_t l = 0; l < L; ++l) {
    std::string h = "h." + std::to_string(l) + ".";
    Mat a = layerNorm(x, T, w(h + "ln_1.weight"), w(h + "ln_1.bias"));
    Mat qkv = conv1d(a, T, w(h + "attn.c_attn.weight"), w(h + "attn.c_attn.bias"), C, 3 * C);
    Mat att(size_t(T * C));
    for (int64_t head = 0; head < H; ++head)
      for (int64_t t = 0; t < T; ++t) {
        std::vector<double> s(size_t(t + 1));
        double top = -1e300, z = 0;
        for (int64_t u = 0; u <= t; ++u) {
          double d = 0;
          for (int64_t k = 0; k < hd; ++k)
            d += qkv[size_t(t * 3 * C + head * hd + k)] * qkv[size_t(u * 3 * C + C + head * hd + k)];
          s[size_t(u)] = d / std::sqrt(double(hd));
          top = std::max(top, s[size_t(u)]);
        }
        for (double &v : s)
          z += (v = std::exp(v - top));
        for (int64_t k = 0; k < hd; ++k) {
          double o = 0;
          for (int64_t u = 0; u <= t; ++u)
            o += s[size_t(u)] / z * qkv[size_t(u * 3 * C + 2 * C + head * hd + k)];
          att[size_t(t * C + head * hd + k)] = o;
        }
      }
    Mat proj = conv1d(att, T, w(h + "attn.c_proj.weight"), w(h + "attn.c_proj.bias"), C, C);
    for (size_t i = 0; i < x.size(); ++i)
      x[i] += proj[i];
    Mat b = layerNorm(x, T, w(h + "ln_2.weight"), w(h + "ln_2.bias"));
    Mat fc = conv1d(b, T, w(h + "mlp.c_fc.weight"), w(h + "mlp.c_fc.bias"), C, 4 * C);
    for (double &v : fc) // gelu_new
      v = 0.5 * v * (1 + std::tanh(std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v)));
    Mat mp = conv1d(fc, T, w(h + "mlp.c_proj.weight"), w(h + "mlp.c_proj.bias"), 4 * C, C);
    for (size_t i = 0; i < x.size(); ++i)
      x[i] += mp[i];
  }
  Mat xf = layerNorm(x, T, w("ln_f.weight"), w("ln_f.bias"));
  Mat logits(size_t(T * V));
  for (int64_t t = 0; t < T; ++t)
    for (int64_t v = 0; v < V; ++v) {
      double s = 0;
      for (int64_t c = 0; c < C; ++c)
        s += xf[size_t(t * C + c)] * w("wte.weight")[size_t(v * C + c)]; // tied head
      logits[size_t(t * V + v)] = s;
    }
  return logits;
}

class HfImportTest : public GPT2Test {
protected:
  /// `tiny` in fp32 for the Host target.
  std::vector<uint8_t> compileTiny() {
    EXPECT_TRUE(
        compile("tiny", Phase::MemoryPlan, [](CompileOptions &o) { o.precision = PrecisionPolicy::Fp32; }));
    codegen::EmitOptions emit;
    emit.target = codegen::EmitOptions::Target::Host;
    auto bytes = codegen::emitExecutable(*module, emit);
    EXPECT_TRUE(mlir::succeeded(bytes)) << diagnostics;
    return mlir::succeeded(bytes) ? *bytes : std::vector<uint8_t>();
  }
  /// `m` as a Hugging Face directory.
  std::string writeModel(const HfModel &m, const std::string &name) {
    std::string dir = (scratch.path() / name).string();
    std::filesystem::create_directories(dir);
    std::vector<safetensors::TensorRef> refs;
    for (const auto &[n, t] : m)
      refs.push_back({n, safetensors::DType::F32, t.first, t.second.data(), t.second.size() * 4});
    EXPECT_TRUE(safetensors::write(dir + "/model.safetensors", refs, {{"format", "pt"}}));
    return dir;
  }
  ScratchDir scratch{"hf-import"};
};

// Verify that imported Hugging Face weights give transformers' loss and
// logits, and export back to the same bytes.
TEST_F(HfImportTest, ImportedWeightsGiveTransformersLossAndExportBack) {
  ASSERT_TRUE(compile("tiny", Phase::MemoryPlan, [](CompileOptions &o) { o.precision = PrecisionPolicy::Fp32; }));
  codegen::EmitOptions emit;
  emit.target = codegen::EmitOptions::Target::Host;
  auto bytes = codegen::emitExecutable(*module, emit);
  ASSERT_TRUE(mlir::succeeded(bytes)) << diagnostics;
  auto exe = Executable::loadBytes(*bytes, "tiny-host.fb");
  ASSERT_TRUE(exe) << exe.status().message();
  auto config = gpt2::configOf(exe->get());
  ASSERT_TRUE(config) << config.status().message();
  auto opened = Session::create(std::move(*exe), createHostBackend);
  ASSERT_TRUE(opened) << opened.status().message();
  Session &session = **opened;
  std::vector<int32_t> seed = {1337};
  ASSERT_TRUE(session.setInput("init", "seed", seed));
  ASSERT_TRUE(session.run("init"));

  HfModel m = randomModel(5);
  std::string dir = (scratch.path() / "hf").string();
  std::filesystem::create_directories(dir);
  std::vector<safetensors::TensorRef> refs;
  for (const auto &[name, t] : m)
    refs.push_back({name, safetensors::DType::F32, t.first, t.second.data(), t.second.size() * 4});
  ASSERT_TRUE(safetensors::write(dir + "/model.safetensors", refs, {{"format", "pt"}}));
  ASSERT_TRUE(writeFileAtomically(dir + "/config.json", gpt2::huggingFaceConfig(*config)));
  Status imported = gpt2::initFrom(session, dir);
  ASSERT_TRUE(imported) << imported.message();

  auto tokensIndex = session.findTensor("tokens", "forward");
  ASSERT_TRUE(tokensIndex);
  int64_t B = session.tensor(*tokensIndex).shape()->Get(0);
  int64_t T = session.tensor(*tokensIndex).shape()->Get(1);
  std::mt19937 gen(3);
  std::vector<int32_t> tokens(size_t(B * T)), targets(size_t(B * T));
  for (size_t i = 0; i < tokens.size(); ++i)
    tokens[i] = int32_t(gen() % V), targets[i] = int32_t(gen() % V);
  ASSERT_TRUE(session.setInput("forward", "tokens", tokens));
  ASSERT_TRUE(session.setInput("forward", "targets", targets));
  ASSERT_TRUE(session.run("forward"));
  auto loss = session.getScalarF32("forward", "loss");
  ASSERT_TRUE(loss) << loss.status().message();

  ASSERT_TRUE(session.setInput("logits", "tokens", tokens));
  ASSERT_TRUE(session.run("logits"));
  auto logits = session.getOutput("logits", "logits");
  ASSERT_TRUE(logits);
  std::vector<float> got(logits->size() / 4);
  std::memcpy(got.data(), logits->data(), logits->size());
  const int64_t Vp = config->paddedVocab;
  ASSERT_EQ(int64_t(got.size()), B * T * Vp);

  double sum = 0, worst = 0;
  for (int64_t b = 0; b < B; ++b) {
    Mat ref = hfLogits(m, tokens.data() + b * T, T);
    for (int64_t t = 0; t < T; ++t) {
      const double *row = ref.data() + t * V;
      double top = *std::max_element(row, row + V), z = 0;
      for (int64_t v = 0; v < V; ++v) {
        z += std::exp(row[v] - top);
        worst = std::max(worst, std::fabs(row[v] - got[size_t((b * T + t) * Vp + v)]));
      }
      sum += top + std::log(z) - row[targets[size_t(b * T + t)]];
    }
  }
  double hfLoss = sum / double(B * T);
  EXPECT_NEAR(*loss, hfLoss, 1e-5 * hfLoss);
  EXPECT_LT(worst, 1e-4); // fp32 logits of magnitude ~1 against fp64
  // Not trivially near uniform: the weights matter.
  EXPECT_GT(std::fabs(hfLoss - std::log(double(V))), 0.05);

  // Out of the session and back to Hugging Face: the same file.
  gpt2::Weights weights;
  for (uint32_t i = 0; i < session.schema().tensors()->size(); ++i) {
    const schema::Tensor &t = session.tensor(i);
    if (t.role() != schema::TensorRole::Parameter)
      continue;
    checkpoint::Tensor w;
    w.name = t.name()->str();
    w.shape.assign(t.shape()->begin(), t.shape()->end());
    w.bytes.resize(t.size_bytes());
    ASSERT_TRUE(session.readTensor(i, w.bytes.data(), w.bytes.size()));
    weights.push_back(std::move(w));
  }
  std::string out = (scratch.path() / "out").string();
  ASSERT_TRUE(gpt2::exportHuggingFace(out, weights, *config));
  EXPECT_EQ(*readFile(out + "/model.safetensors"), *readFile(dir + "/model.safetensors"));
}

// Verify that gptrun's Trainer with --init-from trains from the imported
// weights: step 1's loss is @forward's at those weights on batch 0.
TEST_F(HfImportTest, TrainerStartsFromTheImportedWeights) {
  std::vector<uint8_t> bytes = compileTiny();
  ASSERT_FALSE(bytes.empty());
  std::string exe = (scratch.path() / "tiny.fb").string();
  ASSERT_TRUE(writeFileAtomically(exe, std::string_view(reinterpret_cast<const char *>(bytes.data()),
                                                        bytes.size())));
  std::string dir = writeModel(randomModel(11), "hf");
  std::mt19937 gen(4);
  std::vector<int32_t> text(200);
  for (int32_t &t : text)
    t = int32_t(gen() % V);
  std::string data = (scratch.path() / "train.bin").string();
  ASSERT_TRUE(data::writeTokenFile(data, text));

  auto firstLoss = [&](const std::string &initFrom) -> double {
    gptrun::Options o;
    o.executable = exe;
    o.data = data;
    o.steps = 1;
    o.target = "host";
    o.progress = false;
    o.initFrom = initFrom;
    gptrun::Trainer t(o);
    Status s = t.setUp();
    EXPECT_TRUE(s) << s.message();
    if (s)
      s = t.run();
    EXPECT_TRUE(s) << s.message();
    return t.history().empty() ? -1 : t.history()[0].loss;
  };
  double trained = firstLoss(dir);

  auto exeBytes = Executable::loadBytes(bytes, "tiny.fb");
  ASSERT_TRUE(exeBytes);
  auto opened = Session::create(std::move(*exeBytes), createHostBackend);
  ASSERT_TRUE(opened);
  Session &session = **opened;
  ASSERT_TRUE(session.setInput("init", "seed", std::vector<int32_t>{1337}));
  ASSERT_TRUE(session.run("init"));
  ASSERT_TRUE(gpt2::initFrom(session, dir));
  auto tokens = session.findTensor("tokens", "forward");
  ASSERT_TRUE(tokens);
  size_t n = size_t(session.tensor(*tokens).shape()->Get(0) * session.tensor(*tokens).shape()->Get(1));
  ASSERT_TRUE(session.setInput("forward", "tokens", std::vector<int32_t>(text.begin(), text.begin() + long(n))));
  ASSERT_TRUE(session.setInput("forward", "targets",
                               std::vector<int32_t>(text.begin() + 1, text.begin() + long(n) + 1)));
  ASSERT_TRUE(session.run("forward"));
  auto loss = session.getScalarF32("forward", "loss");
  ASSERT_TRUE(loss);
  EXPECT_NEAR(trained, *loss, 1e-5 * *loss);
  // Without --init-from the run starts from @init: another loss.
  EXPECT_GT(std::fabs(firstLoss("") - trained), 1e-2);
}

} // namespace

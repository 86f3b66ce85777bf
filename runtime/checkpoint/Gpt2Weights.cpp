//===- Gpt2Weights.cpp - GPT-2 weights from and to Hugging Face and llm.c -===//

#include "runtime/checkpoint/Gpt2Weights.h"

#include "runtime/checkpoint/Safetensors.h"
#include "runtime/data/Json.h"
#include "runtime/executor/Session.h"
#include "runtime/support/FileIO.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <sys/stat.h>
#include <unistd.h>

namespace gptc::gpt2 {

namespace {

using data::JsonValue;
using safetensors::DType;

constexpr int32_t kLlmcMagic = 20240326;
constexpr size_t kLlmcHeaderBytes = 256 * 4;

/// One gptc parameter and its Hugging Face counterpart.
struct Param {
  std::string name;           // gptc's
  std::vector<int64_t> shape; // gptc's (wte: Vp rows)
  std::string hf;             // without the "transformer." prefix
  bool transpose = false;     // HF's Conv1D stores (in, out)
};

/// The kinds of a block's parameters, in llm.c's file order.
struct BlockKind {
  const char *name;
  int64_t rows, cols; // in units of C; cols 0: a vector
  bool transpose;
};
constexpr BlockKind kBlockKinds[] = {
    {"ln_1.weight", 1, 0, false},        {"ln_1.bias", 1, 0, false},
    {"attn.c_attn.weight", 3, 1, true},  {"attn.c_attn.bias", 3, 0, false},
    {"attn.c_proj.weight", 1, 1, true},  {"attn.c_proj.bias", 1, 0, false},
    {"ln_2.weight", 1, 0, false},        {"ln_2.bias", 1, 0, false},
    {"mlp.c_fc.weight", 4, 1, true},     {"mlp.c_fc.bias", 4, 0, false},
    {"mlp.c_proj.weight", 1, 4, true},   {"mlp.c_proj.bias", 1, 0, false},
};

Param blockParam(const Config &c, int64_t layer, const BlockKind &k) {
  std::string n = "h." + std::to_string(layer) + "." + k.name;
  std::vector<int64_t> shape = {k.rows * c.nEmbd};
  if (k.cols)
    shape.push_back(k.cols * c.nEmbd);
  return {n, shape, n, k.transpose};
}

/// llm.c's order: wte, wpe, each block kind over all layers, ln_f. gptc's
/// loaders match by name, so one order serves everything.
std::vector<Param> layout(const Config &c) {
  std::vector<Param> out;
  out.push_back({"wte", {c.paddedVocab, c.nEmbd}, "wte.weight", false});
  out.push_back({"wpe", {c.maxT, c.nEmbd}, "wpe.weight", false});
  for (const BlockKind &k : kBlockKinds)
    for (int64_t l = 0; l < c.nLayer; ++l)
      out.push_back(blockParam(c, l, k));
  out.push_back({"ln_f.weight", {c.nEmbd}, "ln_f.weight", false});
  out.push_back({"ln_f.bias", {c.nEmbd}, "ln_f.bias", false});
  return out;
}

int64_t elements(const std::vector<int64_t> &shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

std::string shapeText(const std::vector<int64_t> &shape) {
  std::string s;
  for (int64_t d : shape)
    s += (s.empty() ? "" : ", ") + std::to_string(d);
  return "(" + s + ")";
}

float bf16ToFloat(uint16_t h) {
  uint32_t bits = uint32_t(h) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

float f16ToFloat(uint16_t h) {
  uint32_t sign = uint32_t(h >> 15) << 31, exp = (h >> 10) & 31, mant = h & 1023;
  float f;
  if (exp == 31) {
    uint32_t bits = sign | 0x7F800000u | (mant << 13);
    std::memcpy(&f, &bits, 4);
  } else if (exp == 0) {
    f = std::ldexp(float(mant), -24); // subnormal (or zero)
    if (sign)
      f = -f;
  } else {
    uint32_t bits = sign | ((exp + 112) << 23) | (mant << 13);
    std::memcpy(&f, &bits, 4);
  }
  return f;
}

uint16_t floatToBf16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  if ((bits & 0x7FFFFFFFu) > 0x7F800000u)
    return uint16_t((bits >> 16) | 0x40); // NaN stays a (quiet) NaN
  bits += 0x7FFFu + ((bits >> 16) & 1); // round to nearest even
  return uint16_t(bits >> 16);
}

/// `n` elements of `dtype` at `src`, widened to float (exact).
void widen(const uint8_t *src, DType dtype, size_t n, float *dst) {
  if (dtype == DType::F32) {
    std::memcpy(dst, src, n * 4);
    return;
  }
  for (size_t i = 0; i < n; ++i) {
    uint16_t h;
    std::memcpy(&h, src + 2 * i, 2);
    dst[i] = dtype == DType::BF16 ? bf16ToFloat(h) : f16ToFloat(h);
  }
}

checkpoint::Tensor makeTensor(const Param &p) {
  checkpoint::Tensor t;
  t.name = p.name;
  t.role = schema::TensorRole::Parameter;
  t.dtype = schema::DType::F32;
  t.shape = p.shape;
  t.bytes.assign(size_t(elements(p.shape)) * 4, 0);
  return t;
}

float *floats(checkpoint::Tensor &t) { return reinterpret_cast<float *>(t.bytes.data()); }
const float *floats(const checkpoint::Tensor &t) {
  return reinterpret_cast<const float *>(t.bytes.data());
}

const char *sizeName(int64_t layers, int64_t embd) {
  if (layers == 12 && embd == 768)
    return "124M";
  if (layers == 24 && embd == 1024)
    return "350M";
  if (layers == 36 && embd == 1280)
    return "774M";
  if (layers == 48 && embd == 1600)
    return "1558M";
  return nullptr;
}

/// The model `path` holds against the executable's; "" when they agree.
/// The file's vocabulary may be V or already padded to the target's Vp.
std::string mismatch(const Config &file, const Config &target) {
  bool vocabOk = file.vocab == target.vocab || file.vocab == target.paddedVocab;
  if (file.nLayer == target.nLayer && file.nEmbd == target.nEmbd && file.maxT == target.maxT &&
      vocabOk && (file.nHead == 0 || file.nHead == target.nHead))
    return "";
  return "holds a GPT-2 with " + file.describe() + ", but the executable's model is " +
         target.describe();
}

StatusOr<std::vector<uint8_t>> readRegularFile(const std::string &path) {
  int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0)
    return Status::error(path + ": cannot open: " + errnoText());
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return Status::error(path + ": not a regular file");
  }
  std::vector<uint8_t> bytes(size_t(st.st_size));
  size_t got = 0;
  while (got < bytes.size()) {
    ssize_t n = ::read(fd, bytes.data() + got, bytes.size() - got);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      break;
    got += size_t(n);
  }
  ::close(fd);
  bytes.resize(got);
  return bytes;
}

/// config.json's integer `key`, or 0 when absent.
int64_t configInt(const JsonValue &cfg, const char *key) {
  const JsonValue *v = cfg.find(key);
  return v && v->isInteger ? v->integer : 0;
}

/// What config.json may say that gptc's GPT-2 does not compute.
Status checkHfConfig(const JsonValue &cfg, const std::string &origin) {
  auto bad = [&](const std::string &why) {
    return Status::error(origin + ": " + why + "; gptc's GPT-2 cannot represent this model");
  };
  if (cfg.kind != JsonValue::Kind::Object)
    return bad("not a JSON object");
  if (const JsonValue *t = cfg.find("model_type"); t && t->string != "gpt2")
    return bad("model_type is \"" + t->string + "\", not \"gpt2\"");
  if (const JsonValue *a = cfg.find("activation_function");
      a && a->string != "gelu_new" && a->string != "gelu_pytorch_tanh")
    return bad("activation_function is \"" + a->string + "\" (gptc computes GELU's tanh form, gelu_new)");
  if (const JsonValue *e = cfg.find("layer_norm_epsilon");
      e && e->kind == JsonValue::Kind::Number && std::fabs(e->number - 1e-5) > 1e-12)
    return bad("layer_norm_epsilon is " + std::to_string(e->number) + " (gptc uses 1e-5)");
  auto flag = [&](const char *key, bool gptc) {
    const JsonValue *v = cfg.find(key);
    return !v || v->kind != JsonValue::Kind::Bool || v->boolean == gptc;
  };
  if (!flag("tie_word_embeddings", true))
    return bad("tie_word_embeddings is false (gptc ties the LM head to wte)");
  if (!flag("scale_attn_weights", true) || !flag("scale_attn_by_inverse_layer_idx", false) ||
      !flag("reorder_and_upcast_attn", false))
    return bad("the attention is scaled differently");
  return Status::ok();
}

StatusOr<Weights> fromSafetensors(const safetensors::File &f, const Config &target,
                                  const JsonValue *hfConfig) {
  const std::string &origin = f.origin();
  auto bad = [&](const std::string &why) { return Status::error(origin + ": " + why); };
  std::string prefix = f.find("transformer.wte.weight") ? "transformer." : "";
  const safetensors::TensorView *wte = f.find(prefix + "wte.weight");
  const safetensors::TensorView *wpe = f.find(prefix + "wpe.weight");
  if (!wte)
    return bad("no tensor 'transformer.wte.weight' (nor 'wte.weight'): not a GPT-2 checkpoint");
  if (!wpe)
    return bad("no tensor '" + prefix + "wpe.weight'");
  if (wte->shape.size() != 2 || wpe->shape.size() != 2)
    return bad("tensor '" + prefix + "wte.weight' or '" + prefix + "wpe.weight' is not a matrix");

  Config file;
  file.vocab = wte->shape[0];
  file.nEmbd = wte->shape[1];
  file.maxT = wpe->shape[0];
  while (f.find(prefix + "h." + std::to_string(file.nLayer) + ".ln_1.weight"))
    ++file.nLayer;
  if (hfConfig) {
    file.nHead = configInt(*hfConfig, "n_head");
    // config.json and the tensors must tell the same story.
    for (auto [key, value] : {std::pair<const char *, int64_t>{"n_layer", file.nLayer},
                              {"n_embd", file.nEmbd},
                              {"n_positions", file.maxT},
                              {"vocab_size", file.vocab}})
      if (int64_t c = configInt(*hfConfig, key); c && c != value)
        return bad("config.json says " + std::string(key) + "=" + std::to_string(c) +
                   ", the tensors have " + std::to_string(value));
  }
  if (std::string m = mismatch(file, target); !m.empty())
    return bad(m);

  std::vector<Param> params = layout(target);
  std::set<std::string> expected;
  for (const Param &p : params)
    expected.insert(prefix + p.hf);
  for (const safetensors::TensorView &t : f.tensors()) {
    if (expected.count(t.name) || t.name == "lm_head.weight")
      continue;
    // The causal mask buffers older transformers versions saved.
    auto endsWith = [&](const char *s) {
      size_t n = std::strlen(s);
      return t.name.size() >= n && t.name.compare(t.name.size() - n, n, s) == 0;
    };
    if (t.name.rfind(prefix + "h.", 0) == 0 && (endsWith(".attn.bias") || endsWith(".attn.masked_bias")))
      continue;
    return bad("unexpected tensor '" + t.name + "': not a parameter of GPT-2 with " +
               target.describe());
  }

  Weights out;
  for (const Param &p : params) {
    std::string name = prefix + p.hf;
    const safetensors::TensorView *t = f.find(name);
    if (!t)
      return bad("no tensor '" + name + "'");
    std::vector<int64_t> want = p.shape;
    if (p.transpose)
      std::swap(want[0], want[1]);
    if (p.name == "wte")
      want[0] = file.vocab; // V, or already padded; checked by mismatch()
    if (t->shape != want)
      return bad("tensor '" + name + "' is " + shapeText(t->shape) + ", expected " +
                 shapeText(want));
    if (t->dtype == DType::I32)
      return bad("tensor '" + name + "' is I32, not a floating-point weight");
    checkpoint::Tensor w = makeTensor(p);
    if (!p.transpose) {
      // wte's padded rows (file.vocab..Vp) stay zero.
      widen(t->data, t->dtype, size_t(elements(t->shape)), floats(w));
    } else {
      std::vector<float> tmp(size_t(elements(t->shape)));
      widen(t->data, t->dtype, tmp.size(), tmp.data());
      int64_t rows = p.shape[0], cols = p.shape[1]; // gptc's (out, in)
      float *dst = floats(w);
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < cols; ++c)
          dst[r * cols + c] = tmp[size_t(c * rows + r)];
    }
    out.push_back(std::move(w));
  }
  if (const safetensors::TensorView *head = f.find("lm_head.weight")) {
    if (head->dtype == DType::I32)
      return bad("tensor 'lm_head.weight' is I32, not a floating-point weight");
    std::vector<float> tmp(size_t(elements(head->shape)));
    widen(head->data, head->dtype, tmp.size(), tmp.data());
    if (head->shape != wte->shape ||
        std::memcmp(tmp.data(), floats(out[0]), tmp.size() * 4) != 0)
      return bad("tensor 'lm_head.weight' differs from '" + prefix +
                 "wte.weight': gptc ties the LM head to the token embedding");
  }
  return out;
}

StatusOr<Weights> fromLlmc(const std::vector<uint8_t> &bytes, const std::string &origin,
                           const Config &target) {
  auto bad = [&](const std::string &why) { return Status::error(origin + ": " + why); };
  if (bytes.size() < kLlmcHeaderBytes)
    return bad("truncated llm.c checkpoint (" + std::to_string(bytes.size()) +
               " bytes, the header alone is 1024)");
  int32_t h[256];
  std::memcpy(h, bytes.data(), sizeof(h));
  if (h[1] != 3 && h[1] != 5)
    return bad("llm.c checkpoint version " + std::to_string(h[1]) +
               ": gptc reads 3 (fp32) and 5 (bf16), with the padded vocabulary; re-export it "
               "with llm.c's current train_gpt2.py");
  DType dtype = h[1] == 3 ? DType::F32 : DType::BF16;
  Config file;
  file.maxT = h[2];
  file.vocab = h[3];
  file.nLayer = h[4];
  file.nHead = h[5];
  file.nEmbd = h[6];
  file.paddedVocab = h[7];
  if (file.maxT <= 0 || file.vocab <= 0 || file.nLayer <= 0 || file.nHead <= 0 || file.nEmbd <= 0 ||
      file.paddedVocab < file.vocab)
    return bad("llm.c header has a non-positive size or Vp < V (maxT=" + std::to_string(h[2]) +
               ", V=" + std::to_string(h[3]) + ", L=" + std::to_string(h[4]) + ", NH=" +
               std::to_string(h[5]) + ", C=" + std::to_string(h[6]) + ", Vp=" +
               std::to_string(h[7]) + ")");
  if (file.vocab != target.vocab) // the rows of the padding may differ, V may not
    return bad("holds a GPT-2 with " + file.describe() + ", but the executable's model is " +
               target.describe());
  if (std::string m = mismatch(file, target); !m.empty())
    return bad(m);

  Config fileLayout = target;
  fileLayout.paddedVocab = file.paddedVocab;
  size_t elt = safetensors::dtypeSize(dtype);
  uint64_t offset = kLlmcHeaderBytes;
  Weights out;
  for (const Param &p : layout(fileLayout)) {
    uint64_t size = uint64_t(elements(p.shape)) * elt;
    if (bytes.size() - offset < size)
      return bad("truncated: tensor '" + p.name + "' " + shapeText(p.shape) + " needs bytes " +
                 std::to_string(offset) + " to " + std::to_string(offset + size) +
                 ", the file has " + std::to_string(bytes.size()));
    Param q = p;
    if (p.name == "wte")
      q.shape[0] = target.paddedVocab;
    checkpoint::Tensor w = makeTensor(q);
    // wte: the rows both have; the target's extra padding rows stay zero.
    size_t n = p.name == "wte" ? size_t(std::min(file.paddedVocab, target.paddedVocab) * file.nEmbd)
                               : size_t(elements(p.shape));
    widen(bytes.data() + offset, dtype, n, floats(w));
    offset += size;
    out.push_back(std::move(w));
  }
  if (offset != bytes.size())
    return bad(std::to_string(bytes.size() - offset) +
               " unexpected bytes after the last tensor (ln_f.bias)");
  return out;
}

/// writeAtomically leaves its temporary's 0600; an export is for sharing.
Status shareable(const std::string &path) {
  if (::chmod(path.c_str(), 0644) != 0)
    return Status::error(path + ": cannot chmod: " + errnoText());
  return Status::ok();
}

bool isDirectory(const std::string &path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

} // namespace

std::string Config::describe() const {
  std::string s = "n_layer=" + std::to_string(nLayer);
  if (nHead)
    s += ", n_head=" + std::to_string(nHead);
  s += ", n_embd=" + std::to_string(nEmbd) + ", vocab_size=" + std::to_string(vocab) +
       ", n_positions=" + std::to_string(maxT);
  if (!name.empty())
    s += " ('" + name + "')";
  else if (const char *size = sizeName(nLayer, nEmbd))
    s += " (GPT-2 " + std::string(size) + ")";
  return s;
}

StatusOr<Config> configOf(const schema::Executable &exe) {
  Config c;
  c.identity = checkpoint::executableIdentity(exe);
  c.model = checkpoint::describeModel(exe);
  const schema::Model *m = exe.model();
  if (m && m->name())
    c.name = m->name()->str();
  std::map<std::string, int64_t> cfg;
  if (m && m->config())
    for (const schema::KeyValue *kv : *m->config())
      if (kv->key())
        cfg[kv->key()->str()] = kv->value();
  for (const char *key : {"n_layer", "n_head", "n_embd", "vocab_size", "block_size"})
    if (!cfg.count(key))
      return Status::error("the executable's model has no '" + std::string(key) +
                           "': not a GPT-2");
  c.nLayer = cfg["n_layer"];
  c.nHead = cfg["n_head"];
  c.nEmbd = cfg["n_embd"];
  c.vocab = cfg["vocab_size"];
  c.maxT = cfg["block_size"];
  if (exe.tensors())
    for (const schema::Tensor *t : *exe.tensors())
      if (t->role() == schema::TensorRole::Parameter && t->name() && t->name()->str() == "wte" &&
          t->shape() && t->shape()->size() == 2)
        c.paddedVocab = t->shape()->Get(0);
  if (c.paddedVocab < c.vocab)
    return Status::error("the executable has no parameter 'wte' of at least vocab_size rows");
  return c;
}

StatusOr<Weights> importWeights(const std::string &path, const Config &target) {
  std::string file = path;
  std::optional<JsonValue> hfConfig;
  if (isDirectory(path)) {
    file = path + "/model.safetensors";
    if (::access(file.c_str(), F_OK) != 0)
      return Status::error(path + ": a directory without model.safetensors (a Hugging Face "
                           "GPT-2 directory has model.safetensors and config.json)");
    std::string cfgPath = path + "/config.json";
    if (::access(cfgPath.c_str(), F_OK) == 0) {
      StatusOr<std::string> text = readFile(cfgPath);
      if (!text)
        return text.status();
      StatusOr<JsonValue> json = data::parseJson(*text);
      if (!json)
        return Status::error(cfgPath + ": " + json.status().message());
      if (Status s = checkHfConfig(*json, cfgPath); !s)
        return s;
      hfConfig = std::move(*json);
    }
  }
  StatusOr<std::vector<uint8_t>> bytes = readRegularFile(file);
  if (!bytes)
    return bytes.status();
  int32_t magic = 0;
  if (bytes->size() >= 4)
    std::memcpy(&magic, bytes->data(), 4);
  if (magic == kLlmcMagic)
    return fromLlmc(*bytes, file, target);
  if (bytes->size() >= 8 && std::memcmp(bytes->data(), "GPTCCKPT", 8) == 0) {
    StatusOr<checkpoint::Checkpoint> ckpt = checkpoint::readCheckpoint(file);
    if (!ckpt)
      return ckpt.status();
    return parametersOf(*ckpt, target, file);
  }
  StatusOr<safetensors::File> st = safetensors::File::parse(std::move(*bytes), file);
  if (!st)
    return st.status();
  return fromSafetensors(*st, target, hfConfig ? &*hfConfig : nullptr);
}

Status initFrom(Session &session, const std::string &path) {
  StatusOr<Config> config = configOf(session.schema());
  if (!config)
    return Status::error("--init-from: " + config.status().message());
  StatusOr<Weights> weights = importWeights(path, *config);
  if (!weights)
    return Status::error("--init-from: " + weights.status().message());
  if (Status s = loadParameters(session, *weights, path); !s)
    return Status::error("--init-from: " + s.message());
  return Status::ok();
}

StatusOr<Weights> parametersOf(const checkpoint::Checkpoint &ckpt, const Config &config,
                               const std::string &origin) {
  // The same shapes may belong to another model (n_head is in no shape).
  // Another batch, T or rank count is the same model: the describeModel()
  // text each side records must agree on GPT-2's hyperparameters.
  if (config.identity && ckpt.identity != config.identity) {
    auto has = [&](const std::string &key, int64_t value) {
      std::string field = key + "=" + std::to_string(value);
      for (size_t at = ckpt.model.find(field); at != std::string::npos;
           at = ckpt.model.find(field, at + 1)) {
        size_t end = at + field.size();
        if ((at > 0 && (ckpt.model[at - 1] == '(' || ckpt.model[at - 1] == ' ')) &&
            end < ckpt.model.size() && (ckpt.model[end] == ',' || ckpt.model[end] == ')'))
          return true;
      }
      return false;
    };
    if (!has("n_layer", config.nLayer) || !has("n_head", config.nHead) ||
        !has("n_embd", config.nEmbd) || !has("vocab_size", config.vocab) ||
        !has("block_size", config.maxT))
      return Status::error(origin + " is a checkpoint of " + ckpt.model +
                           ", but the executable is " + config.model);
  }
  std::map<std::string, const checkpoint::Tensor *> byName;
  for (const checkpoint::Tensor &t : ckpt.tensors)
    if (t.role == schema::TensorRole::Parameter)
      byName[t.name] = &t;
  Weights out;
  for (const Param &p : layout(config)) {
    auto it = byName.find(p.name);
    if (it == byName.end())
      return Status::error(origin + ": no parameter '" + p.name + "' (a checkpoint of " +
                           ckpt.model + ", not of GPT-2 with " + config.describe() + ")");
    const checkpoint::Tensor &t = *it->second;
    if (t.dtype != schema::DType::F32 || t.shape != p.shape)
      return Status::error(origin + ": parameter '" + p.name + "' is " +
                           schema::EnumNameDType(t.dtype) + " " + shapeText(t.shape) +
                           ", GPT-2 with " + config.describe() + " has F32 " + shapeText(p.shape));
    out.push_back(t);
  }
  return out;
}

Status loadParameters(Session &session, const Weights &weights, const std::string &origin) {
  std::map<std::string, const checkpoint::Tensor *> byName;
  for (const checkpoint::Tensor &t : weights)
    byName[t.name] = &t;
  const schema::Executable &exe = session.schema();
  std::vector<std::pair<uint32_t, const checkpoint::Tensor *>> plan;
  for (uint32_t i = 0; exe.tensors() && i < exe.tensors()->size(); ++i) {
    const schema::Tensor &st = session.tensor(i);
    if (st.role() != schema::TensorRole::Parameter)
      continue;
    std::string name = st.name() ? st.name()->str() : "";
    auto it = byName.find(name);
    if (it == byName.end())
      return Status::error(origin + ": nothing for the executable's parameter '" + name + "'");
    const checkpoint::Tensor &t = *it->second;
    std::vector<int64_t> shape;
    if (st.shape())
      shape.assign(st.shape()->begin(), st.shape()->end());
    if (t.dtype != st.dtype() || t.shape != shape || t.bytes.size() != st.size_bytes())
      return Status::error(origin + ": tensor '" + name + "' is " + schema::EnumNameDType(t.dtype) +
                           " " + shapeText(t.shape) + ", the executable's " +
                           session.describeTensor(i));
    plan.emplace_back(i, &t);
  }
  if (plan.size() != weights.size())
    return Status::error(origin + ": " + std::to_string(weights.size()) +
                         " tensors for the executable's " + std::to_string(plan.size()) +
                         " parameters");
  for (auto [index, t] : plan)
    if (Status s = session.writeTensor(index, t->bytes.data(), t->bytes.size()); !s)
      return s;
  return Status::ok();
}

std::string huggingFaceConfig(const Config &c) {
  // What transformers.GPT2Config needs to rebuild gptc's model; the rest
  // (dropouts, ...) are its defaults.
  std::string s = "{\n";
  s += "  \"activation_function\": \"gelu_new\",\n";
  s += "  \"architectures\": [\"GPT2LMHeadModel\"],\n";
  if (c.vocab == 50257)
    s += "  \"bos_token_id\": 50256,\n  \"eos_token_id\": 50256,\n";
  s += "  \"layer_norm_epsilon\": 1e-05,\n";
  s += "  \"model_type\": \"gpt2\",\n";
  s += "  \"n_ctx\": " + std::to_string(c.maxT) + ",\n";
  s += "  \"n_embd\": " + std::to_string(c.nEmbd) + ",\n";
  s += "  \"n_head\": " + std::to_string(c.nHead) + ",\n";
  s += "  \"n_layer\": " + std::to_string(c.nLayer) + ",\n";
  s += "  \"n_positions\": " + std::to_string(c.maxT) + ",\n";
  s += "  \"tie_word_embeddings\": true,\n";
  s += "  \"vocab_size\": " + std::to_string(c.vocab) + "\n";
  return s + "}\n";
}

Status exportHuggingFace(const std::string &dir, const Weights &weights, const Config &c) {
  std::map<std::string, const checkpoint::Tensor *> byName;
  for (const checkpoint::Tensor &t : weights)
    byName[t.name] = &t;
  std::vector<std::vector<float>> transposed; // kept alive until written
  std::vector<safetensors::TensorRef> refs;
  std::vector<Param> params = layout(c);
  transposed.reserve(params.size());
  for (const Param &p : params) {
    auto it = byName.find(p.name);
    if (it == byName.end() || it->second->shape != p.shape ||
        it->second->dtype != schema::DType::F32)
      return Status::error(dir + ": no F32 parameter '" + p.name + "' " + shapeText(p.shape) +
                           " to export");
    const checkpoint::Tensor &t = *it->second;
    safetensors::TensorRef r;
    r.name = "transformer." + p.hf;
    r.shape = p.shape;
    r.data = t.bytes.data();
    r.size = t.bytes.size();
    if (p.name == "wte") { // drop the padded rows
      r.shape[0] = c.vocab;
      r.size = size_t(c.vocab * c.nEmbd) * 4;
    } else if (p.transpose) {
      int64_t rows = p.shape[0], cols = p.shape[1];
      std::vector<float> &out = transposed.emplace_back(size_t(rows * cols));
      const float *src = floats(t);
      for (int64_t i = 0; i < rows; ++i)
        for (int64_t j = 0; j < cols; ++j)
          out[size_t(j * rows + i)] = src[i * cols + j];
      r.shape = {cols, rows};
      r.data = out.data();
    }
    refs.push_back(std::move(r));
  }
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec)
    return Status::error(dir + ": cannot create the directory: " + ec.message());
  // transformers refuses a safetensors file without format metadata.
  if (Status s = safetensors::write(dir + "/model.safetensors", refs, {{"format", "pt"}}); !s)
    return s;
  if (Status s = writeFileAtomically(dir + "/config.json", huggingFaceConfig(c)); !s)
    return s;
  if (Status s = shareable(dir + "/model.safetensors"); !s)
    return s;
  return shareable(dir + "/config.json");
}

Status exportLlmc(const std::string &path, const Weights &weights, const Config &c, bool bf16) {
  std::map<std::string, const checkpoint::Tensor *> byName;
  for (const checkpoint::Tensor &t : weights)
    byName[t.name] = &t;
  std::vector<Param> params = layout(c);
  for (const Param &p : params) {
    auto it = byName.find(p.name);
    if (it == byName.end() || it->second->shape != p.shape ||
        it->second->dtype != schema::DType::F32)
      return Status::error(path + ": no F32 parameter '" + p.name + "' " + shapeText(p.shape) +
                           " to export");
  }
  int32_t h[256] = {};
  h[0] = kLlmcMagic;
  h[1] = bf16 ? 5 : 3;
  h[2] = int32_t(c.maxT);
  h[3] = int32_t(c.vocab);
  h[4] = int32_t(c.nLayer);
  h[5] = int32_t(c.nHead);
  h[6] = int32_t(c.nEmbd);
  h[7] = int32_t(c.paddedVocab);
  Status written = writeAtomically(path, [&](int fd) {
    if (Status s = writeAll(fd, h, sizeof(h)); !s)
      return s;
    for (const Param &p : params) {
      const checkpoint::Tensor &t = *byName[p.name];
      if (!bf16) {
        if (Status s = writeAll(fd, t.bytes.data(), t.bytes.size()); !s)
          return s;
        continue;
      }
      std::vector<uint16_t> half(t.bytes.size() / 4);
      const float *src = floats(t);
      for (size_t i = 0; i < half.size(); ++i)
        half[i] = floatToBf16(src[i]);
      if (Status s = writeAll(fd, half.data(), half.size() * 2); !s)
        return s;
    }
    return Status::ok();
  });
  return written ? shareable(path) : written;
}

} // namespace gptc::gpt2

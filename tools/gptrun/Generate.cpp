//===- Generate.cpp - gptrun --sample: text from a checkpoint -------------===//

#include "tools/gptrun/Generate.h"
#include "tools/gptrun/Trainer.h"

#include "runtime/checkpoint/Checkpoint.h"
#include "runtime/checkpoint/Gpt2Weights.h"
#include "runtime/checkpoint/Safetensors.h"
#include "runtime/data/Tokenizer.h"
#include "runtime/executor/OpenSession.h"

namespace gptc::gptrun {

StatusOr<Generator> Generator::create(Session &session) {
  const std::string program = "logits";
  if (StatusOr<const schema::Program *> p = session.program(program); !p)
    return Status::error(p.status().message() +
                         " (recompile with this gptc: @logits is built for sampling)");
  StatusOr<uint32_t> tokens = session.findTensor("tokens", program);
  if (!tokens)
    return Status::error("program 'logits': " + tokens.status().message());
  StatusOr<uint32_t> logits = session.findTensor("logits", program);
  if (!logits)
    return Status::error("program 'logits': " + logits.status().message());
  const schema::Tensor &t = session.tensor(*tokens);
  const schema::Tensor &l = session.tensor(*logits);
  if (t.dtype() != schema::DType::I32 || !t.shape() || t.shape()->size() != 2)
    return Status::error("program 'logits': input " + session.describeTensor(*tokens) +
                         " should be I32 (B, T)");
  Generator g;
  g.session = &session;
  g.logitsIndex = *logits;
  g.rows_ = t.shape()->Get(0);
  g.seq_ = t.shape()->Get(1);
  if (l.dtype() != schema::DType::F32 || l.role() != schema::TensorRole::Output || !l.shape() ||
      l.shape()->size() != 3 || l.shape()->Get(0) != g.rows_ || l.shape()->Get(1) != g.seq_)
    return Status::error("program 'logits': " + session.describeTensor(*logits) +
                         " should be an F32 (B, T, Vp) output");
  g.paddedVocab_ = l.shape()->Get(2);
  g.vocab_ = g.paddedVocab_;
  if (const auto *config = session.schema().model()->config())
    for (const schema::KeyValue *kv : *config)
      if (kv->key() && kv->key()->str() == "vocab_size")
        g.vocab_ = kv->value();
  if (g.vocab_ < 1 || g.vocab_ > g.paddedVocab_)
    return Status::error("model config: vocab_size " + std::to_string(g.vocab_) +
                         " does not fit the logits' " + std::to_string(g.paddedVocab_) + " columns");
  g.logits.resize(size_t(g.rows_ * g.seq_ * g.paddedVocab_));
  return g;
}

StatusOr<int32_t> Generator::next(const std::vector<int32_t> &tokens,
                                  const SamplingOptions &options, UniformSource &uniform) {
  Window w = contextWindow(tokens.size(), seq_);
  if (w.length == 0)
    return Status::error("sampling needs at least one token of context");
  std::vector<int32_t> batch = windowBatch(tokens, w, rows_, seq_, /*pad=*/0);
  if (Status s = session->setInput("logits", "tokens", batch); !s)
    return s;
  if (Status s = session->run("logits"); !s)
    return s;
  // The whole (B, T, Vp) output: the session reads tensors whole.
  if (Status s = session->readTensor(logitsIndex, logits.data(), logits.size() * sizeof(float));
      !s)
    return s;
  const float *row = logits.data() + (w.length - 1) * paddedVocab_; // row 0, last position
  return sampleToken(row, vocab_, options, uniform.next());
}

StatusOr<const std::vector<float> *> Generator::batchLogits(const std::vector<int32_t> &batch) {
  if (Status s = session->setInput("logits", "tokens", batch); !s)
    return s;
  if (Status s = session->run("logits"); !s)
    return s;
  if (Status s = session->readTensor(logitsIndex, logits.data(), logits.size() * sizeof(float));
      !s)
    return s;
  return &logits;
}

StatusOr<std::vector<float>> Generator::rowLogits(const std::vector<int32_t> &tokens) {
  if (tokens.empty() || int64_t(tokens.size()) > seq_)
    return Status::error("--logits-out: the prompt must be 1 to T=" + std::to_string(seq_) +
                         " tokens");
  std::vector<int32_t> batch = windowBatch(tokens, contextWindow(tokens.size(), seq_), rows_, seq_,
                                           /*pad=*/0);
  if (Status s = session->setInput("logits", "tokens", batch); !s)
    return s;
  if (Status s = session->run("logits"); !s)
    return s;
  if (Status s = session->readTensor(logitsIndex, logits.data(), logits.size() * sizeof(float));
      !s)
    return s;
  std::vector<float> out;
  for (size_t t = 0; t < tokens.size(); ++t) {
    const float *row = logits.data() + t * size_t(paddedVocab_);
    out.insert(out.end(), row, row + vocab_);
  }
  return out;
}

namespace {

/// --logits-out: the prompt's ids and row 0's logits, as safetensors.
Status writeLogits(Generator &g, const std::vector<int32_t> &tokens, const std::string &path,
                   std::FILE *log) {
  StatusOr<std::vector<float>> l = g.rowLogits(tokens);
  if (!l)
    return l.status();
  int64_t n = int64_t(tokens.size());
  Status s = safetensors::write(
      path,
      {{"tokens", safetensors::DType::I32, {n}, tokens.data(), tokens.size() * 4},
       {"logits", safetensors::DType::F32, {n, g.vocab()}, l->data(), l->size() * 4}},
      {});
  if (!s)
    return Status::error("--logits-out: " + s.message());
  std::fprintf(log, "gptrun: logits of the %lld prompt tokens in %s\n", (long long)n, path.c_str());
  return Status::ok();
}

/// Parameters from --resume (a file, or the newest in --checkpoint-dir).
Status restoreParameters(Session &session, const Options &o, std::FILE *log) {
  StatusOr<std::string> resolved = resumePath(o);
  if (!resolved)
    return resolved.status();
  const std::string &path = *resolved;
  StatusOr<checkpoint::Checkpoint> ckpt = checkpoint::readCheckpoint(path);
  if (!ckpt)
    return Status::error("--resume: " + ckpt.status().message());
  if (Status s = checkpoint::restore(session, *ckpt, path); !s)
    return s;
  std::fprintf(log, "gptrun: sampling from %s (step %lld)\n", path.c_str(),
               (long long)ckpt->step);
  return Status::ok();
}

/// Parameters from @init with --seed (taken mod 2^24, as training does).
Status initParameters(Session &session, const Options &o, std::FILE *log) {
  int32_t seed = int32_t(o.seed % (1u << 24));
  if (session.findTensor("seed", "init"))
    if (Status s = session.setInput("init", "seed", &seed, sizeof(seed)); !s)
      return s;
  if (Status s = session.run("init"); !s)
    return s;
  if (!o.initFrom.empty()) {
    if (Status s = gpt2::initFrom(session, o.initFrom); !s)
      return s;
    std::fprintf(log, "gptrun: parameters from %s\n", o.initFrom.c_str());
    return Status::ok();
  }
  std::fprintf(log, "gptrun: warning: no --resume: the model is untrained (@init, seed %d); "
                    "expect random text\n", seed);
  return Status::ok();
}

} // namespace

Status loadParameters(Session &session, const Options &o, std::FILE *log) {
  return o.resume.empty() ? initParameters(session, o, log) : restoreParameters(session, o, log);
}

StatusOr<std::unique_ptr<Session>> openLogitsSession(const Options &o) {
  SessionOptions so;
  if (o.target)
    so.target = *o.target == "host" ? schema::TargetKind::Host : schema::TargetKind::CUDA;
  so.cuda.device = o.device;
  so.cuda.gemmAutotune = o.gemmAutotune; // as training does, so the flags are not ignored
  so.cuda.gemmAlgos = o.gemmAlgos;
  StatusOr<std::unique_ptr<Session>> opened = openSession(o.executable, so);
  if (!opened)
    return opened.status();
  if (Status st = checkDeviceFlag(o, (*opened)->backend().kind() == schema::TargetKind::CUDA); !st)
    return st;
  return opened;
}

Status sample(const Options &o, std::FILE *out, std::FILE *log) {
  StatusOr<std::unique_ptr<Session>> opened = openLogitsSession(o);
  if (!opened)
    return opened.status();
  Session &session = **opened;
  StatusOr<Generator> generator = Generator::create(session);
  if (!generator)
    return Status::error(o.executable + ": " + generator.status().message());

  StatusOr<data::Tokenizer> tokenizer = data::Tokenizer::load(o.vocabDir);
  if (!tokenizer)
    return Status::error("--vocab-dir: " + tokenizer.status().message());
  if (generator->vocab() > tokenizer->vocabSize())
    return Status::error("the model's vocabulary (" + std::to_string(generator->vocab()) +
                         ") is larger than the tokenizer's (" +
                         std::to_string(tokenizer->vocabSize()) + ") in " + o.vocabDir);
  // GPT-2 starts unconditional text after <|endoftext|>.
  std::vector<int32_t> tokens = o.samplePrompt.empty()
                                    ? std::vector<int32_t>{tokenizer->endOfText()}
                                    : tokenizer->encode(o.samplePrompt);
  if (int64_t(tokens.size()) > generator->seq())
    return Status::error("--sample: the prompt is " + std::to_string(tokens.size()) +
                         " tokens, more than the T=" + std::to_string(generator->seq()) +
                         " the executable was compiled for");
  for (int32_t id : tokens)
    if (id >= generator->vocab())
      return Status::error("--sample: prompt token " + std::to_string(id) + " ('" +
                           tokenizer->tokenBytes(id) + "') is outside the model's vocabulary of " +
                           std::to_string(generator->vocab()));

  if (Status s = loadParameters(session, o, log); !s)
    return s;
  std::fprintf(log, "gptrun: %lld tokens, T=%lld, temperature %g, top-k %lld, seed %llu\n",
               (long long)o.sampleTokens, (long long)generator->seq(), o.temperature,
               (long long)o.topK, (unsigned long long)o.seed);
  std::fflush(log);

  if (!o.logitsOut.empty())
    if (Status s = writeLogits(*generator, tokens, o.logitsOut, log); !s)
      return s;
  SamplingOptions options{o.temperature, o.topK};
  UniformSource uniform(o.seed);
  std::fputs(o.samplePrompt.c_str(), out);
  std::fflush(out);
  for (int64_t i = 0; i < o.sampleTokens; ++i) {
    StatusOr<int32_t> id = generator->next(tokens, options, uniform);
    if (!id)
      return Status::error("token " + std::to_string(i + 1) + ": " + id.status().message());
    tokens.push_back(*id);
    const std::string &bytes = tokenizer->tokenBytes(*id);
    std::fwrite(bytes.data(), 1, bytes.size(), out);
    std::fflush(out);
  }
  std::fputc('\n', out);
  std::fflush(out);
  return Status::ok();
}

} // namespace gptc::gptrun

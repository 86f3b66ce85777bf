//===- Eval.cpp - gptrun --eval: HellaSwag-style multiple choice ----------===//

#include "tools/gptrun/Eval.h"
#include "tools/gptrun/Generate.h"

#include "runtime/data/Json.h"
#include "runtime/support/FileIO.h"

#include <algorithm>
#include <cmath>
#include <thread>

namespace gptc::gptrun {

StatusOr<std::vector<Example>> loadMultipleChoice(const std::string &path,
                                                  data::Tokenizer &tokenizer, int64_t limit) {
  StatusOr<std::string> text = readFile(path);
  if (!text)
    return Status::error("--eval: " + text.status().message());
  std::vector<Example> out;
  size_t pos = 0;
  for (int64_t line = 1; pos < text->size() && (limit <= 0 || int64_t(out.size()) < limit);
       ++line) {
    size_t end = text->find('\n', pos);
    if (end == std::string::npos)
      end = text->size();
    std::string_view l(text->data() + pos, end - pos);
    pos = end + 1;
    if (l.find_first_not_of(" \t\r") == std::string_view::npos)
      continue;
    auto bad = [&](const std::string &why) {
      return Status::error("--eval: " + path + ":" + std::to_string(line) + ": " + why);
    };
    StatusOr<data::JsonValue> v = data::parseJson(l);
    if (!v)
      return bad(v.status().message());
    const data::JsonValue *ctx = v->find("ctx"), *endings = v->find("endings"),
                          *label = v->find("label");
    if (!ctx || ctx->kind != data::JsonValue::Kind::String)
      return bad("no \"ctx\" string");
    if (!endings || endings->kind != data::JsonValue::Kind::Array || endings->array.size() < 2)
      return bad("no \"endings\" list of at least 2 strings");
    if (!label || !label->isInteger || label->integer < 0 ||
        label->integer >= int64_t(endings->array.size()))
      return bad("\"label\" is not the index of one of the endings");
    Example e;
    e.context = tokenizer.encode(ctx->string);
    for (const data::JsonValue &ending : endings->array) {
      if (ending.kind != data::JsonValue::Kind::String)
        return bad("an ending is not a string");
      // As llm.c and nanoGPT: the ending follows the context after a space.
      e.endings.push_back(tokenizer.encode(" " + ending.string));
      if (e.endings.back().empty())
        return bad("an ending encodes to no tokens");
    }
    if (e.context.empty())
      return bad("the context encodes to no tokens");
    e.label = int(label->integer);
    out.push_back(std::move(e));
  }
  if (out.empty())
    return Status::error("--eval: " + path + ": no examples");
  return out;
}

StatusOr<Row> packRow(const std::vector<int32_t> &context, const std::vector<int32_t> &ending,
                      int64_t seq) {
  if (int64_t(ending.size()) >= seq)
    return Status::error("an ending of " + std::to_string(ending.size()) +
                         " tokens does not fit T=" + std::to_string(seq) +
                         " after at least one context token");
  size_t keep = std::min(context.size(), size_t(seq) - ending.size());
  Row r;
  r.truncated = keep < context.size();
  r.tokens.assign(context.end() - long(keep), context.end());
  r.endingStart = r.tokens.size();
  r.tokens.insert(r.tokens.end(), ending.begin(), ending.end());
  return r;
}

EndingLoss endingLoss(const float *logits, int64_t paddedVocab, int64_t vocab, const Row &row) {
  EndingLoss loss;
  // Position p's logits predict token p + 1.
  for (size_t p = row.endingStart - 1; p + 1 < row.tokens.size(); ++p) {
    const float *l = logits + p * size_t(paddedVocab);
    double top = *std::max_element(l, l + vocab), z = 0;
    for (int64_t v = 0; v < vocab; ++v)
      z += std::exp(double(l[v]) - top);
    loss.sum += top + std::log(z) - double(l[row.tokens[p + 1]]);
    ++loss.tokens;
  }
  return loss;
}

StatusOr<EvalResult> evaluate(const Options &o, std::FILE *out, std::FILE *log) {
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
  StatusOr<std::vector<Example>> examples = loadMultipleChoice(o.eval, *tokenizer, o.evalLimit);
  if (!examples)
    return examples.status();
  for (const Example &e : *examples)
    for (const std::vector<int32_t> &ending : e.endings)
      for (int32_t id : ending)
        if (id >= generator->vocab())
          return Status::error("--eval: token " + std::to_string(id) +
                               " is outside the model's vocabulary of " +
                               std::to_string(generator->vocab()));
  if (Status s = loadParameters(session, o, log); !s)
    return s;

  // Every candidate of every example, in order, B rows to a run.
  std::vector<Row> rows;
  EvalResult result;
  for (size_t i = 0; i < examples->size(); ++i)
    for (const std::vector<int32_t> &ending : (*examples)[i].endings) {
      StatusOr<Row> r = packRow((*examples)[i].context, ending, generator->seq());
      if (!r)
        return Status::error("--eval: example " + std::to_string(i + 1) + ": " +
                             r.status().message());
      result.truncatedRows += r->truncated;
      rows.push_back(std::move(*r));
    }
  const int64_t B = generator->rows(), T = generator->seq(), Vp = generator->paddedVocab();
  std::vector<EndingLoss> losses(rows.size());
  unsigned threads = std::max(1u, std::min(16u, std::thread::hardware_concurrency()));
  for (size_t first = 0; first < rows.size(); first += size_t(B)) {
    size_t n = std::min(size_t(B), rows.size() - first);
    std::vector<int32_t> batch(size_t(B * T), 0); // padding rows and positions: token 0
    for (size_t r = 0; r < n; ++r)
      std::copy(rows[first + r].tokens.begin(), rows[first + r].tokens.end(),
                batch.begin() + long(r * size_t(T)));
    StatusOr<const std::vector<float> *> logits = generator->batchLogits(batch);
    if (!logits)
      return logits.status();
    // The softmax over the vocabulary dominates: the rows in parallel.
    std::vector<std::thread> pool;
    for (unsigned t = 0; t < std::min<size_t>(threads, n); ++t)
      pool.emplace_back([&, t] {
        for (size_t r = t; r < n; r += threads)
          losses[first + r] = endingLoss((*logits)->data() + r * size_t(T * Vp), Vp,
                                         generator->vocab(), rows[first + r]);
      });
    for (std::thread &th : pool)
      th.join();
  }
  size_t at = 0;
  for (const Example &e : *examples) {
    size_t k = e.endings.size();
    auto pick = [&](auto key) {
      size_t best = 0;
      for (size_t j = 1; j < k; ++j)
        if (key(losses[at + j]) < key(losses[at + best]))
          best = j;
      return int(best);
    };
    result.correctNorm += pick([](const EndingLoss &l) { return l.mean(); }) == e.label;
    result.correctSum += pick([](const EndingLoss &l) { return l.sum; }) == e.label;
    at += k;
  }
  result.examples = int64_t(examples->size());
  std::fprintf(out, "eval %s: %lld examples | acc_norm %.4f (%lld) | acc %.4f (%lld)",
               o.eval.c_str(), (long long)result.examples,
               double(result.correctNorm) / double(result.examples), (long long)result.correctNorm,
               double(result.correctSum) / double(result.examples), (long long)result.correctSum);
  if (result.truncatedRows)
    std::fprintf(out, " | %lld rows lost context tokens to T=%lld", (long long)result.truncatedRows,
                 (long long)T);
  std::fputc('\n', out);
  std::fflush(out);
  return result;
}

} // namespace gptc::gptrun

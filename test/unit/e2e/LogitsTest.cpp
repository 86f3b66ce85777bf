//===- LogitsTest.cpp - @logits on the host target ------------------------===//
//
// gpt-insert-logits through the whole pipeline and codegen: the Host
// executable's @logits, fed the parameters of @init, gives logits whose
// mean cross-entropy (over the first vocab_size columns) is @forward's loss
// for the same tokens and targets; and row 0's logits depend only on row 0
// up to their position, which `gptrun --sample` relies on when it pads.
//
//===----------------------------------------------------------------------===//

#include "TestUtils.h"

#include "compiler/Codegen/EmitExecutable.h"
#include "runtime/executor/HostBackend.h"
#include "runtime/executor/Session.h"

#include <cstring>
#include <random>

using namespace gptc;
using namespace gptc::testing;

namespace {

class LogitsTest : public GPT2Test {
protected:
  /// Compiles `tiny` under `precision` for the Host target and runs @init.
  void open(const std::string &precision) {
    ASSERT_TRUE(compile("tiny", Phase::MemoryPlan,
                        [&](CompileOptions &o) { o.precision = *parsePrecision(precision); }));
    codegen::EmitOptions emit;
    emit.target = codegen::EmitOptions::Target::Host;
    auto bytes = codegen::emitExecutable(*module, emit);
    ASSERT_TRUE(mlir::succeeded(bytes)) << diagnostics;
    auto exe = Executable::loadBytes(*bytes, "tiny-" + precision + "-host.fb");
    ASSERT_TRUE(exe) << exe.status().message();
    auto s = Session::create(std::move(*exe), createHostBackend);
    ASSERT_TRUE(s) << s.status().message();
    session = std::move(*s);
    std::vector<int32_t> seed = {1337};
    ASSERT_TRUE(session->setInput("init", "seed", seed));
    ASSERT_TRUE(session->run("init"));
    auto tokens = session->findTensor("tokens", "logits");
    ASSERT_TRUE(tokens) << tokens.status().message();
    const schema::Tensor &t = session->tensor(*tokens);
    rows = t.shape()->Get(0);
    seq = t.shape()->Get(1);
    auto logits = session->findTensor("logits", "logits");
    ASSERT_TRUE(logits) << logits.status().message();
    ASSERT_EQ(session->tensor(*logits).dtype(), schema::DType::F32);
    ASSERT_EQ(session->tensor(*logits).shape()->size(), 3u);
    padded = session->tensor(*logits).shape()->Get(2);
  }

  std::vector<float> logits(const std::vector<int32_t> &tokens) {
    EXPECT_TRUE(session->setInput("logits", "tokens", tokens));
    Status ran = session->run("logits");
    EXPECT_TRUE(ran) << ran.message();
    auto bytes = session->getOutput("logits", "logits");
    EXPECT_TRUE(bytes) << bytes.status().message();
    std::vector<float> out(size_t(rows * seq * padded));
    if (bytes && bytes->size() == out.size() * sizeof(float))
      std::memcpy(out.data(), bytes->data(), bytes->size());
    return out;
  }

  std::vector<int32_t> randomTokens(uint32_t seed) {
    std::mt19937 gen(seed);
    std::vector<int32_t> t(size_t(rows * seq));
    for (int32_t &x : t)
      x = int32_t(gen() % kVocab);
    return t;
  }

  /// The cross-entropy of @logits's output against @forward's loss.
  void checkLoss(const std::string &precision) {
    ASSERT_NO_FATAL_FAILURE(open(precision));
    EXPECT_EQ(padded, 64); // tiny: 60 padded to a multiple of 16
    std::vector<int32_t> tokens = randomTokens(1), targets = randomTokens(2);
    ASSERT_TRUE(session->setInput("forward", "tokens", tokens));
    ASSERT_TRUE(session->setInput("forward", "targets", targets));
    ASSERT_TRUE(session->run("forward"));
    auto loss = session->getScalarF32("forward", "loss");
    ASSERT_TRUE(loss) << loss.status().message();

    std::vector<float> l = logits(tokens);
    double sum = 0;
    for (int64_t p = 0; p < rows * seq; ++p) {
      const float *row = l.data() + p * padded;
      double top = row[0];
      for (int64_t v = 1; v < kVocab; ++v)
        top = std::max(top, double(row[v]));
      double z = 0;
      for (int64_t v = 0; v < kVocab; ++v)
        z += std::exp(double(row[v]) - top);
      sum += top + std::log(z) - row[targets[p]];
    }
    double ce = sum / double(rows * seq);
    EXPECT_NEAR(ce, *loss, 1e-5 * *loss) << precision;
    EXPECT_NEAR(*loss, std::log(60.0), 0.5); // untrained: about uniform
  }

  static constexpr int64_t kVocab = 60;
  std::unique_ptr<Session> session;
  int64_t rows = 0, seq = 0, padded = 0;
};

// Verify that @logits's cross-entropy is @forward's loss (fp32).
TEST_F(LogitsTest, CrossEntropyOfLogitsIsTheForwardLoss) { checkLoss("fp32"); }

// Verify the same under bf16: @logits keeps @forward's precision policy.
TEST_F(LogitsTest, Bf16LogitsKeepThePolicy) { checkLoss("bf16"); }

// Verify that @logits is forward-only: no gradient or optimizer op, no
// targets input, and one (B, T, Vp) fp32 result.
TEST_F(LogitsTest, IsForwardOnly) {
  ASSERT_TRUE(compile("tiny", Phase::MemoryPlan));
  mlir::func::FuncOp fn = function("logits");
  ASSERT_TRUE(fn);
  fn.walk([&](mlir::Operation *op) {
    llvm::StringRef name = op->getName().getStringRef();
    EXPECT_FALSE(name.ends_with("_grad") || name == "gpt.adamw" || name == "gpt.global_norm" ||
                 name == "gpt.cross_entropy")
        << name.str();
  });
  for (const std::string &name : reference::getArgumentNames(fn))
    EXPECT_NE(name, "targets");
  ASSERT_EQ(fn.getNumResults(), 1u);
  auto type = llvm::cast<mlir::RankedTensorType>(fn.getResultTypes()[0]);
  EXPECT_EQ(type.getShape(), (llvm::ArrayRef<int64_t>{2, 8, 64}));
  EXPECT_TRUE(type.getElementType().isF32());
}

// Verify causality as the sampler uses it: changing the other rows and the
// positions after p leaves row 0's logits at 0..p unchanged bit for bit,
// while position p+1 does change (the check can fail).
TEST_F(LogitsTest, RowZeroIgnoresPaddingAfterIt) {
  ASSERT_NO_FATAL_FAILURE(open("fp32"));
  std::vector<int32_t> a = randomTokens(3), b = randomTokens(4);
  const int64_t p = 3;
  for (int64_t i = 0; i <= p; ++i)
    b[i] = a[i];
  std::vector<float> la = logits(a), lb = logits(b);
  for (int64_t i = 0; i < (p + 1) * padded; ++i)
    ASSERT_EQ(la[i], lb[i]) << "position " << i / padded << " column " << i % padded;
  bool differs = false;
  for (int64_t i = (p + 1) * padded; i < (p + 2) * padded; ++i)
    differs |= la[i] != lb[i];
  EXPECT_TRUE(differs);
}

} // namespace

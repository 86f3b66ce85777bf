//===- LoweringTest.cpp - codegen's reductions against the reference -----===//
//
// The column reductions (gpt.reduce over leading dimensions, the dweight and
// dbias of gpt.layernorm_grad, a GELU gradient's column-sum fusion) and
// gpt.global_norm are split into several kernels (partials in the
// workspace, then folds), and gpt.random_normal ops are batched into
// shared launches; the row kernels of a bf16 residual stream mix bf16 and
// f32 operands. These tests compile them for the Host target, run them
// through the runtime's Host backend and compare every output with the
// fp64 reference interpreter, on shapes that give several row chunks with a
// ragged last one, several pieces per norm input and more norm inputs (and
// draws) than one batched kernel takes.
//
//===----------------------------------------------------------------------===//

#include "TestUtils.h"

#include "compiler/Codegen/EmitExecutable.h"
#include "compiler/Transforms/Passes.h"
#include "runtime/executor/HostBackend.h"
#include "runtime/executor/Session.h"

#include "mlir/Pass/PassManager.h"

#include <cmath>
#include <cstring>
#include <functional>
#include <map>

using namespace gptc;
using namespace gptc::testing;
using reference::Tensor;

namespace {

/// A @train_step argument `%name` of `type`, the input `name`.
std::string in(const std::string &name, const std::string &type) {
  return "%" + name + ": " + type + " {gpt.input = \"" + name + "\"}";
}
/// A @train_step result of `type`, the output `name`.
std::string out(const std::string &type, const std::string &name) {
  return type + " {gpt.output = \"" + name + "\"}";
}

// 3 x 190 = 570 rows: 9 chunks of 64 rows, the last one ragged (58 rows:
// 7 unrolled trips of 8 and 2 rows alone), so the second stage folds one
// unrolled trip of 8 partials and one alone; 2850 elements: 3 pieces per
// norm input.
constexpr int64_t kB = 3, kT = 190, kC = 5, kNormInputs = 131;

/// A reference tensor of shape `dims` holding `data` (floats or ints).
template <typename Data> Tensor asTensor(std::vector<int64_t> dims, const Data &data) {
  return Tensor(std::move(dims), std::vector<double>(data.begin(), data.end()));
}

std::string source() {
  std::string x = "tensor<3x190x5xf32>", v = "tensor<5xf32>";
  std::string norm = "  %n = gpt.global_norm ", types;
  for (int64_t i = 0; i < kNormInputs; ++i) {
    const char *operand = i % 3 == 0 ? "%x" : i % 3 == 1 ? "%dy" : "%w";
    norm += std::string(i ? ", " : "") + operand;
    types += std::string(i ? ", " : "") + (i % 3 == 2 ? v : x);
  }
  norm += " : (" + types + ") -> tensor<f32>\n";
  return std::string(kStubPrograms) +
         "func.func @train_step(%x: " + x + " {gpt.input = \"x\"}, %dy: " + x +
         " {gpt.input = \"dy\"}, %w: " + v + " {gpt.input = \"w\"}) -> (" + v +
         " {gpt.output = \"sum\"}, " + v + " {gpt.output = \"max\"}, " + v +
         " {gpt.output = \"mean\"}, " + x + " {gpt.output = \"dx\"}, " + v +
         " {gpt.output = \"dw\"}, " + v + " {gpt.output = \"db\"}, tensor<f32> {gpt.output = \"norm\"}, " +
         x + " {gpt.output = \"gelu_grad\"}, " + v + " {gpt.output = \"gelu_grad_sum\"}) {\n"
         "  %s = gpt.reduce sum %x dims [0, 1] : (" + x + ") -> " + v + "\n"
         "  %m = gpt.reduce max %x dims [0, 1] : (" + x + ") -> " + v + "\n"
         "  %a = gpt.reduce mean %x dims [0, 1] : (" + x + ") -> " + v + "\n"
         "  %dx, %dw, %db = gpt.layernorm_grad %dy, %x, %w {epsilon = 1.0e-05 : f64} : (" + x +
         ", " + x + ", " + v + ") -> (" + x + ", " + v + ", " + v + ")\n" + norm +
         "  %gd, %gs = gpt.fusion (%dy, %x) : (" + x + ", " + x + ") -> (" + x + ", " + v + ") {\n"
         "  ^bb0(%ga: " + x + ", %xa: " + x + "):\n"
         "    %d0 = gpt.gelu_grad %ga, %xa : " + x + "\n"
         "    %s0 = gpt.reduce sum %d0 dims [0, 1] : (" + x + ") -> " + v + "\n"
         "    gpt.yield %d0, %s0 : " + x + ", " + v + "\n"
         "  }\n"
         "  return %s, %m, %a, %dx, %dw, %db, %n, %gd, %gs : " + v + ", " + v + ", " + v + ", " + x +
         ", " + v + ", " + v + ", tensor<f32>, " + x + ", " + v + "\n}\n";
}

class LoweringTest : public ReferenceTest {
protected:
  void checkEmbedGrad(int64_t b, int64_t t, int64_t c, int64_t vocab,
                      const std::function<int32_t(size_t)> &ids);
  /// Plans every program of `module` and opens it as a Host executable.
  std::unique_ptr<Session> hostSession(const std::string &origin) {
    if (!planPrograms())
      return nullptr;
    codegen::EmitOptions emit;
    emit.target = codegen::EmitOptions::Target::Host;
    auto bytes = codegen::emitExecutable(*module, emit);
    EXPECT_TRUE(mlir::succeeded(bytes)) << diagnostics;
    if (mlir::failed(bytes))
      return nullptr;
    auto exe = Executable::loadBytes(*bytes, origin);
    EXPECT_TRUE(exe) << exe.status().message();
    if (!exe)
      return nullptr;
    auto session = Session::create(std::move(*exe), createHostBackend);
    EXPECT_TRUE(session) << session.status().message();
    return session ? std::move(*session) : nullptr;
  }

  /// train_step's kernel launches by kernel name, less its number.
  static std::map<std::string, int> trainStepLaunches(Session &s) {
    std::map<std::string, int> launches;
    const schema::Executable &exe = s.schema();
    for (const schema::Program *p : *exe.programs())
      if (p->name()->str() == "train_step")
        for (const schema::Command *c : *p->commands())
          if (const schema::LaunchKernel *l = c->op_as_LaunchKernel()) {
            std::string name = exe.kernels()->Get(l->kernel())->name()->str();
            ++launches[name.substr(0, name.find_last_of('_'))];
          }
    return launches;
  }

  /// How many elements of train_step's f32 output `name` lie more than
  /// `rel` (relative) from `want`'s, the first of them in `first`.
  int elementsOff(Session &s, const char *name, const Tensor &want, double rel,
                  std::string &first) {
    auto got = s.getOutput("train_step", name);
    EXPECT_TRUE(got) << name << ": " << got.status().message();
    if (!got)
      return -1;
    EXPECT_EQ(got->size(), want.data.size() * 4) << name;
    if (got->size() != want.data.size() * 4)
      return -1;
    int far = 0;
    for (size_t i = 0; i < want.data.size(); ++i) {
      float g;
      std::memcpy(&g, got->data() + 4 * i, 4);
      double wv = want.data[i];
      if (!(std::fabs(g - wv) <= rel * std::fabs(wv)) && far++ == 0)
        first = std::string(name) + "[" + std::to_string(i) + "]: " + std::to_string(g) +
                " against " + std::to_string(wv);
    }
    return far;
  }

  /// train_step's outputs `names`, in order, against the reference's.
  void expectOutputsMatch(Session &s, const std::vector<Tensor> &want,
                          std::initializer_list<const char *> names, double tolerance = 1e-4) {
    size_t o = 0;
    for (const char *name : names) {
      auto out = s.getOutput("train_step", name);
      ASSERT_TRUE(out) << name << ": " << out.status().message();
      const Tensor &w = want[o++];
      ASSERT_EQ(out->size(), w.data.size() * sizeof(float)) << name;
      const float *got = reinterpret_cast<const float *>(out->data());
      for (size_t i = 0; i < w.data.size(); ++i)
        EXPECT_NEAR(got[i], w.data[i], tolerance * (1.0 + std::abs(w.data[i])))
            << name << "[" << i << "]";
    }
  }
};

TEST_F(LoweringTest, SplitReductionsMatchTheReference) {
  module = parse(source());
  ASSERT_TRUE(module);

  // Inputs with a nonzero mean and a spread, so that a lost or doubled
  // chunk changes every output.
  int64_t n = kB * kT * kC;
  std::vector<float> x(n), dy(n), w(kC);
  for (int64_t i = 0; i < n; ++i) {
    x[i] = static_cast<float>(std::sin(0.37 * i) + 0.01 * (i % 97));
    dy[i] = static_cast<float>(std::cos(0.11 * i) * 0.5 + 0.2);
  }
  for (int64_t i = 0; i < kC; ++i)
    w[i] = 0.5f + 0.25f * static_cast<float>(i);

  auto fn = module->lookupSymbol<mlir::func::FuncOp>("train_step");
  ASSERT_TRUE(fn);
  auto ref = reference::evaluate(
      fn,
      {asTensor({kB, kT, kC}, x),
       asTensor({kB, kT, kC}, dy),
       asTensor({kC}, w)},
      reference::Precision::F64);
  ASSERT_TRUE(mlir::succeeded(ref)) << diagnostics;

  auto session = hostSession("reductions-host.fb");
  ASSERT_TRUE(session);
  ASSERT_TRUE(session->setInput("train_step", "x", x));
  ASSERT_TRUE(session->setInput("train_step", "dy", dy));
  ASSERT_TRUE(session->setInput("train_step", "w", w));
  Status ran = session->run("train_step");
  ASSERT_TRUE(ran) << ran.message();
  expectOutputsMatch(*session, *ref,
                     {"sum", "max", "mean", "dx", "dw", "db", "norm", "gelu_grad", "gelu_grad_sum"});
}

// gpt.embed_grad's counting sort: 3 x 300 = 900 rows are 4 chunks of 256
// (the last ragged) and 37 vocabulary rows 37 buckets, so every bucket
// holds rows from several chunks.
/// gpt.embed_grad of a (b, t, c) gradient over tokens ids(i) < vocab on the
/// Host target, against the fp64 reference.
void LoweringTest::checkEmbedGrad(int64_t b, int64_t t, int64_t c, int64_t vocab,
                                  const std::function<int32_t(size_t)> &ids) {
  auto type = [](std::vector<int64_t> dims, const char *elt) {
    std::string s = "tensor<";
    for (int64_t d : dims)
      s += std::to_string(d) + "x";
    return s + elt + ">";
  };
  std::string dy = type({b, t, c}, "f32"), idsT = type({b, t}, "i32");
  std::string wte = type({vocab, c}, "f32"), wpe = type({t, c}, "f32");
  module = parse(
      std::string(kStubPrograms) +
      "func.func @train_step(%dy: " + dy + " {gpt.input = \"dy\"}, %ids: " + idsT +
      " {gpt.input = \"ids\"}) -> (" + wte + " {gpt.output = \"wte\"}, " + wpe +
      " {gpt.output = \"wpe\"}) {\n"
      "  %w, %p = gpt.embed_grad %dy, %ids {vocab_rows = " + std::to_string(vocab) +
      " : i64, position_rows = " + std::to_string(t) + " : i64} : (" + dy + ", " + idsT +
      ") -> (" + wte + ", " + wpe + ")\n"
      "  return %w, %p : " + wte + ", " + wpe + "\n}\n");
  ASSERT_TRUE(module);

  std::vector<float> g(b * t * c);
  std::vector<int32_t> id(b * t);
  for (size_t i = 0; i < g.size(); ++i)
    g[i] = static_cast<float>(std::sin(0.29 * static_cast<double>(i)) + 0.1);
  for (size_t i = 0; i < id.size(); ++i)
    id[i] = ids(i);
  auto fn = module->lookupSymbol<mlir::func::FuncOp>("train_step");
  ASSERT_TRUE(fn);
  auto ref = reference::evaluate(
      fn,
      {asTensor({b, t, c}, g),
       asTensor({b, t}, id)},
      reference::Precision::F64);
  ASSERT_TRUE(mlir::succeeded(ref)) << diagnostics;

  auto session = hostSession("embed-grad-host.fb");
  ASSERT_TRUE(session);
  ASSERT_TRUE(session->setInput("train_step", "dy", g));
  ASSERT_TRUE(session->setInput("train_step", "ids", id));
  Status ran = session->run("train_step");
  ASSERT_TRUE(ran) << ran.message();
  expectOutputsMatch(*session, *ref, {"wte", "wpe"});
}

TEST_F(LoweringTest, EmbedGradOverSeveralChunksMatchesTheReference) {
  checkEmbedGrad(3, 300, 4, 37, [](size_t i) { return static_cast<int32_t>((i * 7 + i / 13) % 37); });
}

// More tokens than buckets (1024): tokens 5, 1029 and 2053 share bucket 5
// and alternate in runs of one to three rows, so the scatter's running sum
// goes back to memory and is reloaded whenever the token changes; the
// other rows spread over the vocabulary.
TEST_F(LoweringTest, EmbedGradWithTokensSharingABucketMatchesTheReference) {
  checkEmbedGrad(2, 700, 4, 2100, [](size_t i) {
    if (i % 2 == 0) {
      static const int32_t shared[] = {5, 1029, 1029, 2053, 5, 5, 2053, 1029};
      return shared[(i / 2) % 8];
    }
    return static_cast<int32_t>((i * 31) % 2100);
  });
}

// gpt.random_normal batched: 130 draws are two launches (128 + 2), of f32
// and bf16 outputs (two element-type classes in the first; bf16 draws
// failed to load on the Host target before, f64 -> bf16 being a missing
// libgcc helper), of 1 to 61 elements
// (one to four pieces of 16), each with its own stream and scale. Every
// output against the fp64 reference rounded to its type: within one ulp of
// that type (the kernels' log and cos against libm), and a draw that took
// another's stream, scale or elements differs everywhere.
TEST_F(LoweringTest, BatchedRandomNormalsMatchTheReference) {
  constexpr int kDraws = 130;
  auto sizeOf = [](int i) { return 1 + (i * 37) % 61; };
  auto typeOf = [&](int i) {
    return "tensor<" + std::to_string(sizeOf(i)) + (i % 3 == 1 ? "xbf16>" : "xf32>");
  };
  std::string results, body, values, types;
  for (int i = 0; i < kDraws; ++i) {
    std::string sep = i ? ", " : "";
    results += sep + typeOf(i) + " {gpt.output = \"r" + std::to_string(i) + "\"}";
    body += "  %r" + std::to_string(i) + " = gpt.random_normal %seed {stream = " +
            std::to_string(1000 + 3 * i) + " : i64, std = " + std::to_string(0.01 * (1 + i % 5)) +
            " : f64} : (tensor<i32>) -> " + typeOf(i) + "\n";
    values += sep + "%r" + std::to_string(i);
    types += sep + typeOf(i);
  }
  module = parse(
      std::string(kStubPrograms) +
      "func.func @train_step(%seed: tensor<i32> {gpt.input = \"seed\"}) -> (" + results + ") {\n" +
      body + "  return " + values + " : " + types + "\n}\n");
  ASSERT_TRUE(module);
  auto fn = module->lookupSymbol<mlir::func::FuncOp>("train_step");
  auto ref = reference::evaluate(fn, {Tensor({}, 77.0)}, reference::Precision::F64);
  ASSERT_TRUE(mlir::succeeded(ref)) << diagnostics;

  auto session = hostSession("random-normal-host.fb");
  ASSERT_TRUE(session);
  auto program = session->program("train_step");
  ASSERT_TRUE(program) << program.status().message();
  int launches = 0;
  for (const schema::Command *c : *(*program)->commands())
    launches += c->op_type() == schema::Op::LaunchKernel;
  EXPECT_EQ(launches, 2);
  ASSERT_TRUE(session->setInput("train_step", "seed", std::vector<int32_t>{77}));
  Status ran = session->run("train_step");
  ASSERT_TRUE(ran) << ran.message();
  int far = 0, exact = 0, elements = 0;
  std::string first;
  for (int i = 0; i < kDraws; ++i) {
    auto out = session->getOutput("train_step", "r" + std::to_string(i));
    ASSERT_TRUE(out) << out.status().message();
    bool bf16 = i % 3 == 1;
    for (int e = 0; e < sizeOf(i); ++e) {
      float got;
      if (bf16) {
        uint32_t bits = uint32_t((*out)[2 * e]) | uint32_t((*out)[2 * e + 1]) << 8;
        bits <<= 16;
        std::memcpy(&got, &bits, 4);
      } else {
        std::memcpy(&got, out->data() + 4 * e, 4);
      }
      double want = (*ref)[i].data[e];
      // One ulp of the output type at `want` (bf16: 8 significant bits).
      double ulp = std::ldexp(1.0, std::ilogb(want) - (bf16 ? 7 : 23));
      ++elements;
      exact += std::fabs(got - want) <= ulp / 2;
      if (!(std::fabs(got - want) <= ulp) && far++ == 0)
        first = "r" + std::to_string(i) + "[" + std::to_string(e) + "]: " + std::to_string(got) +
                " against " + std::to_string(want);
    }
  }
  EXPECT_EQ(far, 0) << "elements more than an ulp off; the first: " << first;
  EXPECT_GT(exact, elements * 99 / 100);
}

// The row kernels of a bf16 residual stream (--narrow-residual) on the Host
// target: a residual add and layernorm row fusion over bf16 operands with a bf16 sum and f32
// weight and bias, gpt.layernorm of that bf16 sum, a row-gradient fusion
// of the residual gradient without a narrow copy (bf16 gradient, input and
// residual, widened in its body), gpt.embed of
// f32 tables stored as bf16, and gpt.embed_grad reading a bf16 gradient
// into f32 tables. Every output against the fp64 reference rounded to its
// type: bf16 outputs within one bf16 ulp (the kernels compute in f32), f32
// ones within 1e-4 relative. 3 x 40 rows of 24 channels, 37 tokens.
TEST_F(LoweringTest, NarrowResidualRowKernelsMatchTheReference) {
  constexpr int64_t b = 3, t = 40, c = 24, vocab = 37, n = b * t * c;
  auto ty = [](std::initializer_list<int64_t> dims, const char *elt) {
    std::string s = "tensor<";
    for (int64_t d : dims)
      s += std::to_string(d) + "x";
    return s + elt + ">";
  };
  std::string x = ty({b, t, c}, "f32"), xh = ty({b, t, c}, "bf16"), v = ty({c}, "f32");
  std::string wte = ty({vocab, c}, "f32"), wpe = ty({t, c}, "f32"), ids = ty({b, t}, "i32");
  module = parse(
      std::string(kStubPrograms) +
      "func.func @train_step(" + in("h", x) + ", " + in("r", x) + ", " + in("w", v) + ", " +
      in("bias", v) + ", " + in("dy", x) + ", " + in("acc", x) + ", " + in("wte", wte) + ", " +
      in("wpe", wpe) + ", " + in("ids", ids) + ") -> (" + out(xh, "sum") + ", " + out(xh, "y") +
      ", " + out(xh, "z") + ", " + out(xh, "dx") + ", " + out(v, "dw") + ", " + out(v, "db") + ", " +
      out(xh, "e") + ", " + out(wte, "dwte") + ", " + out(wpe, "dwpe") + ") {\n"
      "  %hh = gpt.cast %h : " + x + " to " + xh + "\n"
      "  %rh = gpt.cast %r : " + x + " to " + xh + "\n"
      "  %dyh = gpt.cast %dy : " + x + " to " + xh + "\n"
      "  %acch = gpt.cast %acc : " + x + " to " + xh + "\n"
      "  %s, %y = gpt.fusion (%rh, %hh, %w, %bias) : (" + xh + ", " + xh + ", " + v + ", " + v +
      ") -> (" + xh + ", " + xh + ") {\n"
      "  ^bb0(%ra: " + xh + ", %ha: " + xh + ", %wa: " + v + ", %ba: " + v + "):\n"
      "    %sa = gpt.add %ra, %ha : " + xh + "\n"
      "    %ya = gpt.layernorm %sa, %wa, %ba : (" + xh + ", " + v + ", " + v + ") -> " + xh + "\n"
      "    gpt.yield %sa, %ya : " + xh + ", " + xh + "\n"
      "  }\n"
      "  %z = gpt.layernorm %s, %w, %bias : (" + xh + ", " + v + ", " + v + ") -> " + xh + "\n"
      "  %dx, %dw, %db = gpt.fusion (%dyh, %s, %w, %acch) : (" + xh + ", " + xh + ", " + v + ", " +
      xh + ") -> (" + xh + ", " + v + ", " + v + ") {\n"
      "  ^bb0(%dya: " + xh + ", %xa: " + xh + ", %wga: " + v + ", %acca: " + xh + "):\n"
      "    %xw = gpt.cast %xa : " + xh + " to " + x + "\n"
      "    %g, %gw, %gb = gpt.layernorm_grad %dya, %xw, %wga : (" + xh + ", " + x + ", " + v +
      ") -> (" + x + ", " + v + ", " + v + ")\n"
      "    %accw = gpt.cast %acca : " + xh + " to " + x + "\n"
      "    %gs = gpt.add %accw, %g : " + x + "\n"
      "    %gh = gpt.cast %gs : " + x + " to " + xh + "\n"
      "    gpt.yield %gh, %gw, %gb : " + xh + ", " + v + ", " + v + "\n"
      "  }\n"
      "  %e = gpt.embed %wte, %wpe, %ids : (" + wte + ", " + wpe + ", " + ids + ") -> " + xh + "\n"
      "  %dwte, %dwpe = gpt.embed_grad %dyh, %ids {vocab_rows = " + std::to_string(vocab) +
      " : i64, position_rows = " + std::to_string(t) + " : i64} : (" + xh + ", " + ids + ") -> (" +
      wte + ", " + wpe + ")\n"
      "  return %s, %y, %z, %dx, %dw, %db, %e, %dwte, %dwpe : " + xh + ", " + xh + ", " + xh + ", " +
      xh + ", " + v + ", " + v + ", " + xh + ", " + wte + ", " + wpe + "\n}\n");
  ASSERT_TRUE(module);

  // A stream with a mean and a spread per row, so the statistics matter.
  std::vector<float> h(n), r(n), dy(n), acc(n), w(c), bias(c), tok(vocab * c), pos(t * c);
  std::vector<int32_t> id(b * t);
  for (int64_t i = 0; i < n; ++i) {
    h[i] = static_cast<float>(std::sin(0.37 * i) + 0.01 * (i % 97));
    r[i] = static_cast<float>(3.0 * std::cos(0.05 * i) + 0.5);
    dy[i] = static_cast<float>(std::cos(0.11 * i) * 0.5 + 0.2);
    acc[i] = static_cast<float>(std::sin(0.07 * i) * 0.3);
  }
  for (int64_t i = 0; i < c; ++i) {
    w[i] = 0.5f + 0.25f * static_cast<float>(i % 7);
    bias[i] = 0.1f * static_cast<float>(i % 5) - 0.2f;
  }
  for (size_t i = 0; i < tok.size(); ++i)
    tok[i] = static_cast<float>(std::sin(0.13 * static_cast<double>(i)) * 0.02);
  for (size_t i = 0; i < pos.size(); ++i)
    pos[i] = static_cast<float>(std::cos(0.17 * static_cast<double>(i)) * 0.01);
  for (size_t i = 0; i < id.size(); ++i)
    id[i] = static_cast<int32_t>((i * 7 + i / 13) % vocab);

  auto fn = module->lookupSymbol<mlir::func::FuncOp>("train_step");
  ASSERT_TRUE(fn);
  auto ref = reference::evaluate(fn,
                                 {asTensor({b, t, c}, h), asTensor({b, t, c}, r), asTensor({c}, w),
                                  asTensor({c}, bias), asTensor({b, t, c}, dy),
                                  asTensor({b, t, c}, acc), asTensor({vocab, c}, tok),
                                  asTensor({t, c}, pos), asTensor({b, t}, id)},
                                 reference::Precision::F64);
  ASSERT_TRUE(mlir::succeeded(ref)) << diagnostics;

  auto session = hostSession("narrow-residual-host.fb");
  ASSERT_TRUE(session);
  for (auto [name, data] : {std::pair<const char *, const std::vector<float> *>{"h", &h},
                            {"r", &r}, {"w", &w}, {"bias", &bias}, {"dy", &dy}, {"acc", &acc},
                            {"wte", &tok}, {"wpe", &pos}})
    ASSERT_TRUE(session->setInput("train_step", name, *data)) << name;
  ASSERT_TRUE(session->setInput("train_step", "ids", id));
  Status ran = session->run("train_step");
  ASSERT_TRUE(ran) << ran.message();

  const char *names[] = {"sum", "y", "z", "dx", "dw", "db", "e", "dwte", "dwpe"};
  const bool narrow[] = {true, true, true, true, false, false, true, false, false};
  for (size_t o = 0; o < std::size(names); ++o) {
    auto got = session->getOutput("train_step", names[o]);
    ASSERT_TRUE(got) << names[o] << ": " << got.status().message();
    const Tensor &want = (*ref)[o];
    ASSERT_EQ(got->size(), want.data.size() * (narrow[o] ? 2 : 4)) << names[o];
    int far = 0;
    std::string first;
    for (size_t i = 0; i < want.data.size(); ++i) {
      float g;
      if (narrow[o]) {
        uint32_t bits = (uint32_t((*got)[2 * i]) | uint32_t((*got)[2 * i + 1]) << 8) << 16;
        std::memcpy(&g, &bits, 4);
      } else {
        std::memcpy(&g, got->data() + 4 * i, 4);
      }
      double wv = want.data[i];
      double tol = narrow[o] ? std::ldexp(1.0, std::ilogb(wv) - 7) + 1e-6
                             : 1e-4 * (1.0 + std::abs(wv));
      if (!(std::fabs(g - wv) <= tol) && far++ == 0)
        first = std::string(names[o]) + "[" + std::to_string(i) + "]: " + std::to_string(g) +
                " against " + std::to_string(wv);
    }
    EXPECT_EQ(far, 0) << names[o] << ": elements off; the first: " << first;
  }
}

// A row fusion whose layernorm reads a prologue other than a residual add:
// m = x * g, s = bias_add(m, v), y = layernorm(s), all yielded, on the
// Host target (one lane per row: the passes loop over the row) against the
// fp64 interpreter running the body. f32 outputs within 1e-4 relative
// (the kernel computes in f32). 3 x 40 rows of 24 channels.
TEST_F(LoweringTest, RowFusionPrologueMatchesTheReference) {
  constexpr int64_t b = 3, t = 40, c = 24, n = b * t * c;
  std::string x = "tensor<3x40x24xf32>", v = "tensor<24xf32>";
  module = parse(
      std::string(kStubPrograms) +
      "func.func @train_step(" + in("x", x) + ", " + in("g", x) + ", " + in("v", v) + ", " +
      in("w", v) + ", " + in("bias", v) + ") -> (" + out(x, "m") + ", " + out(x, "s") + ", " + out(x, "y") +
      ") {\n"
      "  %m, %s, %y = gpt.fusion (%x, %g, %v, %w, %bias) : (" + x + ", " + x + ", " + v + ", " + v +
      ", " + v + ") -> (" + x + ", " + x + ", " + x + ") {\n"
      "  ^bb0(%xa: " + x + ", %ga: " + x + ", %va: " + v + ", %wa: " + v + ", %ba: " + v + "):\n"
      "    %ma = gpt.mul %xa, %ga : " + x + "\n"
      "    %sa = gpt.bias_add %ma, %va : (" + x + ", " + v + ") -> " + x + "\n"
      "    %ya = gpt.layernorm %sa, %wa, %ba : (" + x + ", " + v + ", " + v + ") -> " + x + "\n"
      "    gpt.yield %ma, %sa, %ya : " + x + ", " + x + ", " + x + "\n"
      "  }\n"
      "  return %m, %s, %y : " + x + ", " + x + ", " + x + "\n}\n");
  ASSERT_TRUE(module);

  std::vector<float> xs(n), gs(n), vs(c), w(c), bias(c);
  for (int64_t i = 0; i < n; ++i) {
    xs[i] = static_cast<float>(std::sin(0.37 * i) + 0.01 * (i % 97));
    gs[i] = static_cast<float>(1.5 + std::cos(0.05 * i));
  }
  for (int64_t i = 0; i < c; ++i) {
    vs[i] = 0.3f * static_cast<float>(i % 4) - 0.4f;
    w[i] = 0.5f + 0.25f * static_cast<float>(i % 7);
    bias[i] = 0.1f * static_cast<float>(i % 5) - 0.2f;
  }
  auto fn = module->lookupSymbol<mlir::func::FuncOp>("train_step");
  ASSERT_TRUE(fn);
  auto ref = reference::evaluate(fn,
                                 {asTensor({b, t, c}, xs), asTensor({b, t, c}, gs),
                                  asTensor({c}, vs), asTensor({c}, w), asTensor({c}, bias)},
                                 reference::Precision::F64);
  ASSERT_TRUE(mlir::succeeded(ref)) << diagnostics;

  auto session = hostSession("row-fusion-host.fb");
  ASSERT_TRUE(session);
  for (auto [name, data] : {std::pair<const char *, const std::vector<float> *>{"x", &xs},
                            {"g", &gs}, {"v", &vs}, {"w", &w}, {"bias", &bias}})
    ASSERT_TRUE(session->setInput("train_step", name, *data)) << name;
  Status ran = session->run("train_step");
  ASSERT_TRUE(ran) << ran.message();
  expectOutputsMatch(*session, *ref, {"m", "s", "y"});
}

// A row-gradient fusion whose epilogue no named op had: e = dx * g,
// f = bias_add(e, v), both yielded with dweight and dbias, on the Host
// target against the fp64 interpreter running the body. The layernorm_grad
// reads dy through a widening cast (bf16 operand). f32 outputs within 1e-4
// relative (the kernel computes in f32). 3 x 40 rows of 24 channels.
TEST_F(LoweringTest, RowGradFusionEpilogueMatchesTheReference) {
  constexpr int64_t b = 3, t = 40, c = 24, n = b * t * c;
  std::string x = "tensor<3x40x24xf32>", xh = "tensor<3x40x24xbf16>", v = "tensor<24xf32>";
  module = parse(
      std::string(kStubPrograms) +
      "func.func @train_step(" + in("dy", x) + ", " + in("x", x) + ", " + in("w", v) + ", " +
      in("g", x) + ", " + in("v", v) + ") -> (" + out(x, "e") + ", " + out(x, "f") + ", " +
      out(v, "dw") + ", " + out(v, "db") + ") {\n"
      "  %dyh = gpt.cast %dy : " + x + " to " + xh + "\n"
      "  %e, %f, %dw, %db = gpt.fusion (%dyh, %x, %w, %g, %v) : (" + xh + ", " + x + ", " + v +
      ", " + x + ", " + v + ") -> (" + x + ", " + x + ", " + v + ", " + v + ") {\n"
      "  ^bb0(%dya: " + xh + ", %xa: " + x + ", %wa: " + v + ", %ga: " + x + ", %va: " + v + "):\n"
      "    %dyw = gpt.cast %dya : " + xh + " to " + x + "\n"
      "    %dx, %dwa, %dba = gpt.layernorm_grad %dyw, %xa, %wa : (" + x + ", " + x + ", " + v +
      ") -> (" + x + ", " + v + ", " + v + ")\n"
      "    %ea = gpt.mul %dx, %ga : " + x + "\n"
      "    %fa = gpt.bias_add %ea, %va : (" + x + ", " + v + ") -> " + x + "\n"
      "    gpt.yield %ea, %fa, %dwa, %dba : " + x + ", " + x + ", " + v + ", " + v + "\n"
      "  }\n"
      "  return %e, %f, %dw, %db : " + x + ", " + x + ", " + v + ", " + v + "\n}\n");
  ASSERT_TRUE(module);

  std::vector<float> dy(n), xs(n), w(c), gs(n), vs(c);
  for (int64_t i = 0; i < n; ++i) {
    dy[i] = static_cast<float>(std::cos(0.11 * i) * 0.5 + 0.2);
    xs[i] = static_cast<float>(std::sin(0.37 * i) + 0.01 * (i % 97));
    gs[i] = static_cast<float>(1.5 + std::cos(0.05 * i));
  }
  for (int64_t i = 0; i < c; ++i) {
    w[i] = 0.5f + 0.25f * static_cast<float>(i % 7);
    vs[i] = 0.3f * static_cast<float>(i % 4) - 0.4f;
  }
  auto fn = module->lookupSymbol<mlir::func::FuncOp>("train_step");
  ASSERT_TRUE(fn);
  auto ref = reference::evaluate(fn,
                                 {asTensor({b, t, c}, dy), asTensor({b, t, c}, xs),
                                  asTensor({c}, w), asTensor({b, t, c}, gs), asTensor({c}, vs)},
                                 reference::Precision::F64);
  ASSERT_TRUE(mlir::succeeded(ref)) << diagnostics;

  auto session = hostSession("row-grad-fusion-host.fb");
  ASSERT_TRUE(session);
  for (auto [name, data] : {std::pair<const char *, const std::vector<float> *>{"dy", &dy},
                            {"x", &xs}, {"w", &w}, {"g", &gs}, {"v", &vs}})
    ASSERT_TRUE(session->setInput("train_step", name, *data)) << name;
  Status ran = session->run("train_step");
  ASSERT_TRUE(ran) << ran.message();
  expectOutputsMatch(*session, *ref, {"e", "f", "dw", "db"});
}

// GEMM fusions on the Host backend against the interpreter, each yielding
// its values in the other order than gpt-fuse-matmul-epilogue builds them:
// codegen finds D, the GELU's pre-activation and the column sums by what
// the body computes, not by position. A swapped role gives another tensor
// (or size) altogether. Measured: 3.9e-7 at most (relative to 1 + |x|; f32
// sums of 16 to 32 terms); the bound is 2e-6.
TEST_F(LoweringTest, GemmFusionsMatchTheReference) {
  constexpr int64_t m = 16, k = 24, n = 32;
  std::string x = "tensor<16x24xf32>", w = "tensor<32x24xf32>", b = "tensor<32xf32>",
              y = "tensor<16x32xf32>", dw = "tensor<32x24xf32>";
  module = parse(
      std::string(kStubPrograms) +
      "func.func @train_step(" + in("x", x) + ", " + in("w", w) + ", " + in("b", b) + ", " +
      in("dy", y) + ") -> (" + out(y, "pre") + ", " + out(y, "h") + ", " + out(b, "db") + ", " +
      out(dw, "dw") + ", " + out("tensor<24xf32>", "dsum") + ", " + out(x, "dgrad") + ") {\n"
      // GELU_AUX_BIAS: (pre, gelu).
      "  %pre, %h = gpt.fusion (%x, %w, %b) : (" + x + ", " + w + ", " + b + ") -> (" + y +
      ", " + y + ") {\n"
      "  ^bb0(%xa: " + x + ", %wa: " + w + ", %ba: " + b + "):\n"
      "    %acc = gpt.linear %xa, %wa, %ba : (" + x + ", " + w + ", " + b + ") -> " + y + "\n"
      "    %g = gpt.gelu %acc : " + y + "\n"
      "    gpt.yield %acc, %g : " + y + ", " + y + "\n"
      "  }\n"
      // BGRADB: (db, dW) of dY and x.
      "  %db, %dw = gpt.fusion (%dy, %x) : (" + y + ", " + x + ") -> (" + b + ", " + dw + ") {\n"
      "  ^bb0(%dya: " + y + ", %xa: " + x + "):\n"
      "    %p = gpt.matmul %dya, %xa {transpose_lhs} : (" + y + ", " + x + ") -> " + dw + "\n"
      "    %s = gpt.reduce sum %dya dims [0] : (" + y + ") -> " + b + "\n"
      "    gpt.yield %s, %p : " + b + ", " + dw + "\n"
      "  }\n"
      // DGELU_BGRAD: (sums, gradient) of dY W at the pre-activation x.
      "  %dsum, %dgrad = gpt.fusion (%dy, %w, %x) : (" + y + ", " + w + ", " + x + ") -> (" +
      "tensor<24xf32>, " + x + ") {\n"
      "  ^bb0(%dya: " + y + ", %wa: " + w + ", %xa: " + x + "):\n"
      "    %p = gpt.matmul %dya, %wa : (" + y + ", " + w + ") -> " + x + "\n"
      "    %d = gpt.gelu_grad %p, %xa : " + x + "\n"
      "    %s = gpt.reduce sum %d dims [0] : (" + x + ") -> tensor<24xf32>\n"
      "    gpt.yield %s, %d : tensor<24xf32>, " + x + "\n"
      "  }\n"
      "  return %pre, %h, %db, %dw, %dsum, %dgrad : " + y + ", " + y + ", " + b + ", " + dw +
      ", tensor<24xf32>, " + x + "\n}\n");
  ASSERT_TRUE(module);

  std::vector<float> xs(m * k), ws(n * k), bs(n), dys(m * n);
  for (int64_t i = 0; i < m * k; ++i)
    xs[i] = static_cast<float>(std::sin(0.37 * i) + 0.01 * (i % 13));
  for (int64_t i = 0; i < n * k; ++i)
    ws[i] = static_cast<float>(0.3 * std::cos(0.23 * i));
  for (int64_t i = 0; i < n; ++i)
    bs[i] = 0.1f * static_cast<float>(i % 5) - 0.2f;
  for (int64_t i = 0; i < m * n; ++i)
    dys[i] = static_cast<float>(std::cos(0.11 * i) * 0.5 + 0.2);
  auto fn = module->lookupSymbol<mlir::func::FuncOp>("train_step");
  ASSERT_TRUE(fn);
  auto ref = reference::evaluate(fn,
                                 {asTensor({m, k}, xs), asTensor({n, k}, ws), asTensor({n}, bs),
                                  asTensor({m, n}, dys)},
                                 reference::Precision::F64);
  ASSERT_TRUE(mlir::succeeded(ref)) << diagnostics;

  auto session = hostSession("gemm-fusions-host.fb");
  ASSERT_TRUE(session);
  for (auto [name, data] : {std::pair<const char *, const std::vector<float> *>{"x", &xs},
                            {"w", &ws}, {"b", &bs}, {"dy", &dys}})
    ASSERT_TRUE(session->setInput("train_step", name, *data)) << name;
  Status ran = session->run("train_step");
  ASSERT_TRUE(ran) << ran.message();
  expectOutputsMatch(*session, *ref, {"pre", "h", "db", "dw", "dsum", "dgrad"}, 2e-6);
}

// gpt.fp8_scale's kernels (amax stages, scale), gpt.fp8_quantize's (cast to
// codes) and gpt.scaled_matmul on the Host backend against the
// interpreter, which quantizes in f64: each quantized tensor times an
// identity (exact in e4m3) gives back its dequantized values, so every
// code is checked, not a sum of them. x (16 x 256, 4096 elements: an amax stage of partials, then the
// last fold) spans 2^-24 to 2^3 in magnitude with both signs, through
// e4m3's subnormals (below 2^-6 of 448 / amax) down to values that round
// to zero; z takes the e5m2 path through a transposed copy, and through
// gpt.fp8_cast_transpose's two copies (each times an identity), and
// through two cast-transposes of which one copy is read (a recomputed one:
// a kernel of that layout only). A wrong
// rounding moves a value by a step of its format (>= 2^-3 relative), far
// beyond the bound (one f32 rounding of the identity's scale).
TEST_F(LoweringTest, Fp8QuantizeMatchesTheReference) {
  constexpr int64_t m = 16, k = 256;
  std::string x = "tensor<16x256xf32>", z = "tensor<256x16xf32>", eye = "tensor<256x256xf32>";
  std::string qx = "tensor<16x256xf8E4M3FN>", qz = "tensor<16x256xf8E5M2>",
              qi = "tensor<256x256xf8E4M3FN>", y = "tensor<16x256xf32>";
  std::string eye16 = "tensor<16x16xf32>", qi16 = "tensor<16x16xf8E4M3FN>",
              qzr = "tensor<256x16xf8E5M2>", yr = "tensor<256x16xf32>";
  module = parse(
      std::string(kStubPrograms) +
      "func.func @train_step(%x: " + x + " {gpt.input = \"x\"}, %z: " + z +
      " {gpt.input = \"z\"}, %eye: " + eye + " {gpt.input = \"eye\"}, %eye16: " + eye16 +
      " {gpt.input = \"eye16\"}) -> (" + y + " {gpt.output = \"x8\"}, " + y +
      " {gpt.output = \"zt8\"}, " + y + " {gpt.output = \"zt8_pair\"}, " + yr +
      " {gpt.output = \"z8_pair\"}, " + y + " {gpt.output = \"zt8_only\"}, " + yr +
      " {gpt.output = \"z8_only\"}) {\n"
      "  %fx, %sx = gpt.fp8_scale e4m3 %x : (" + x + ") -> (tensor<f32>, tensor<f32>)\n"
      "  %fz, %sz = gpt.fp8_scale e5m2 %z : (" + z + ") -> (tensor<f32>, tensor<f32>)\n"
      "  %fi, %si = gpt.fp8_scale e4m3 %eye : (" + eye + ") -> (tensor<f32>, tensor<f32>)\n"
      "  %fj, %sj = gpt.fp8_scale e4m3 %eye16 : (" + eye16 + ") -> (tensor<f32>, tensor<f32>)\n"
      "  %qj = gpt.fp8_quantize e4m3 %eye16, %fj : (" + eye16 + ", tensor<f32>) -> " + qi16 + "\n"
      "  %pz, %pzt = gpt.fp8_cast_transpose e5m2 %z, %fz : (" + z + ", tensor<f32>) -> (" + qzr +
      ", " + qz + ")\n"
      "  %rz, %rzt = gpt.fp8_cast_transpose e5m2 %z, %fz : (" + z + ", tensor<f32>) -> (" + qzr +
      ", " + qz + ")\n"
      "  %tz, %tzt = gpt.fp8_cast_transpose e5m2 %z, %fz : (" + z + ", tensor<f32>) -> (" + qzr +
      ", " + qz + ")\n"
      "  %qx = gpt.fp8_quantize e4m3 %x, %fx : (" + x + ", tensor<f32>) -> " + qx + "\n"
      "  %qz = gpt.fp8_quantize e5m2 %z, %fz {transpose} : (" + z + ", tensor<f32>) -> " + qz + "\n"
      "  %qi = gpt.fp8_quantize e4m3 %eye, %fi : (" + eye + ", tensor<f32>) -> " + qi + "\n"
      "  %x8 = gpt.scaled_matmul %qx, %sx, %qi, %si {transpose_rhs, fast_accum} : (" + qx +
      ", tensor<f32>, " + qi + ", tensor<f32>) -> " + y + "\n"
      "  %zt8 = gpt.scaled_matmul %qz, %sz, %qi, %si {transpose_rhs} : (" + qz + ", tensor<f32>, " +
      qi + ", tensor<f32>) -> " + y + "\n"
      "  %zt8p = gpt.scaled_matmul %pzt, %sz, %qi, %si {transpose_rhs} : (" + qz + ", tensor<f32>, " +
      qi + ", tensor<f32>) -> " + y + "\n"
      "  %z8p = gpt.scaled_matmul %pz, %sz, %qj, %sj {transpose_rhs} : (" + qzr + ", tensor<f32>, " +
      qi16 + ", tensor<f32>) -> " + yr + "\n"
      "  %zt8o = gpt.scaled_matmul %tzt, %sz, %qi, %si {transpose_rhs} : (" + qz + ", tensor<f32>, " +
      qi + ", tensor<f32>) -> " + y + "\n"
      "  %z8o = gpt.scaled_matmul %rz, %sz, %qj, %sj {transpose_rhs} : (" + qzr + ", tensor<f32>, " +
      qi16 + ", tensor<f32>) -> " + yr + "\n"
      "  return %x8, %zt8, %zt8p, %z8p, %zt8o, %z8o : " + y + ", " + y + ", " + y + ", " + yr +
      ", " + y + ", " + yr + "\n}\n");
  ASSERT_TRUE(module);

  std::vector<float> xs(m * k), zs(k * m), id(k * k, 0.0f), id16(m * m, 0.0f);
  for (int64_t i = 0; i < m * k; ++i) {
    // Magnitudes 2^-24 .. 2^3 with a varying mantissa and sign.
    double e = -24.0 + 27.0 * static_cast<double>((i * 37) % 1001) / 1000.0;
    double v = std::ldexp(1.0 + 0.5 * std::sin(0.7 * static_cast<double>(i)), static_cast<int>(e));
    xs[i] = static_cast<float>(i % 3 == 0 ? -v : v);
    zs[i] = static_cast<float>(std::cos(0.31 * static_cast<double>(i)) *
                               std::ldexp(1.0, static_cast<int>(i % 23) - 15));
  }
  for (int64_t i = 0; i < k; ++i)
    id[i * k + i] = 1.0f;
  for (int64_t i = 0; i < m; ++i)
    id16[i * m + i] = 1.0f;

  auto fn = module->lookupSymbol<mlir::func::FuncOp>("train_step");
  ASSERT_TRUE(fn);
  auto ref = reference::evaluate(fn,
                                 {asTensor({m, k}, xs), asTensor({k, m}, zs), asTensor({k, k}, id),
                                  asTensor({m, m}, id16)},
                                 reference::Precision::F64);
  ASSERT_TRUE(mlir::succeeded(ref)) << diagnostics;

  auto session = hostSession("fp8-quantize-host.fb");
  ASSERT_TRUE(session);
  ASSERT_TRUE(session->setInput("train_step", "x", xs));
  ASSERT_TRUE(session->setInput("train_step", "z", zs));
  ASSERT_TRUE(session->setInput("train_step", "eye", id));
  ASSERT_TRUE(session->setInput("train_step", "eye16", id16));
  Status ran = session->run("train_step");
  ASSERT_TRUE(ran) << ran.message();

  // Kernels by what they write: the pair both layouts, the cast-transposes
  // read once one layout each, as a quantization of that layout does.
  std::map<std::string, int> launches = trainStepLaunches(*session);
  EXPECT_EQ(launches["fp8_cast_transpose"], 1);
  EXPECT_EQ(launches["fp8_quantize_transpose"], 2); // %qz and %tz
  EXPECT_EQ(launches["fp8_quantize"], 4);           // %qj, %rz, %qx and %qi

  const char *names[] = {"x8", "zt8", "zt8_pair", "z8_pair", "zt8_only", "z8_only"};
  for (size_t o = 0; o < std::size(names); ++o) {
    std::string first;
    EXPECT_EQ(elementsOff(*session, names[o], (*ref)[o], 1e-6, first), 0)
        << names[o] << ": elements off; the first: " << first;
  }
  // The smallest values flush to zero: the subnormal range is crossed.
  EXPECT_GT(llvm::count((*ref)[0].data, 0.0), 0);
}

// gpt.fp8_cast_transpose's rounded_to on the Host backend against the
// fp64 interpreter: an f32 tensor rounded to bf16, then to e4m3, in both
// layouts (the cast-transpose kernel) and in one (the quantize kernel a
// recomputed cast gets), each read back through an FP8 GEMM with an
// identity at scale 1. Every other element is m 2^e with m = 1.0625 plus
// 2^-20: above e4m3's midpoint between 1 and 1.125 (so 1.125 unrounded),
// on it once rounded to bf16 (so 1, the even code). The same cast without
// rounded_to must give the other code there, or the data tests nothing.
TEST_F(LoweringTest, Fp8CastTransposeRoundedToMatchesTheReference) {
  constexpr int64_t n = 64;
  std::string w = "tensor<64x64xf32>", q = "tensor<64x64xf8E4M3FN>";
  module = parse(
      std::string(kStubPrograms) +
      "func.func @train_step(%w: " + w + " {gpt.input = \"w\"}, %eye: " + w +
      " {gpt.input = \"eye\"}, %one: tensor<f32> {gpt.input = \"one\"}) -> (" + w +
      " {gpt.output = \"both\"}, " + w + " {gpt.output = \"both_t\"}, " + w +
      " {gpt.output = \"one_layout\"}, " + w + " {gpt.output = \"plain\"}) {\n"
      "  %qi = gpt.fp8_quantize e4m3 %eye, %one : (" + w + ", tensor<f32>) -> " + q + "\n"
      "  %q, %qt = gpt.fp8_cast_transpose e4m3 %w, %one {rounded_to = bf16} : (" + w +
      ", tensor<f32>) -> (" + q + ", " + q + ")\n"
      "  %r, %rt = gpt.fp8_cast_transpose e4m3 %w, %one {rounded_to = bf16} : (" + w +
      ", tensor<f32>) -> (" + q + ", " + q + ")\n"
      "  %u, %ut = gpt.fp8_cast_transpose e4m3 %w, %one : (" + w + ", tensor<f32>) -> (" + q +
      ", " + q + ")\n"
      "  %both = gpt.scaled_matmul %q, %one, %qi, %one {transpose_rhs} : (" + q + ", tensor<f32>, " +
      q + ", tensor<f32>) -> " + w + "\n"
      "  %bt = gpt.scaled_matmul %qt, %one, %qi, %one {transpose_rhs} : (" + q + ", tensor<f32>, " +
      q + ", tensor<f32>) -> " + w + "\n"
      "  %once = gpt.scaled_matmul %r, %one, %qi, %one {transpose_rhs} : (" + q + ", tensor<f32>, " +
      q + ", tensor<f32>) -> " + w + "\n"
      "  %plain = gpt.scaled_matmul %u, %one, %qi, %one {transpose_rhs} : (" + q +
      ", tensor<f32>, " + q + ", tensor<f32>) -> " + w + "\n"
      "  return %both, %bt, %once, %plain : " + w + ", " + w + ", " + w + ", " + w + "\n}\n");
  ASSERT_TRUE(module);

  std::vector<float> ws(n * n), id(n * n, 0.0f), one = {1.0f};
  for (int64_t i = 0; i < n * n; ++i) {
    int e = static_cast<int>(i % 13) - 6;
    double m = i % 2 ? 1.0625 + std::ldexp(1.0, -20)
                     : 1.0 + 0.9 * std::fabs(std::sin(0.37 * static_cast<double>(i)));
    ws[i] = static_cast<float>((i % 3 ? 1.0 : -1.0) * std::ldexp(m, e));
  }
  for (int64_t i = 0; i < n; ++i)
    id[i * n + i] = 1.0f;

  auto fn = module->lookupSymbol<mlir::func::FuncOp>("train_step");
  ASSERT_TRUE(fn);
  auto ref = reference::evaluate(
      fn, {asTensor({n, n}, ws), asTensor({n, n}, id), asTensor({}, one)}, reference::Precision::F64);
  ASSERT_TRUE(mlir::succeeded(ref)) << diagnostics;

  auto session = hostSession("fp8-rounded-host.fb");
  ASSERT_TRUE(session);
  ASSERT_TRUE(session->setInput("train_step", "w", ws));
  ASSERT_TRUE(session->setInput("train_step", "eye", id));
  ASSERT_TRUE(session->setInput("train_step", "one", one));
  Status ran = session->run("train_step");
  ASSERT_TRUE(ran) << ran.message();

  std::map<std::string, int> launches = trainStepLaunches(*session);
  EXPECT_EQ(launches["fp8_cast_transpose"], 1); // %q
  EXPECT_EQ(launches["fp8_quantize"], 3);       // %qi, %r and %u: one layout read

  const char *names[] = {"both", "both_t", "one_layout", "plain"};
  for (size_t o = 0; o < std::size(names); ++o) {
    std::string first;
    EXPECT_EQ(elementsOff(*session, names[o], (*ref)[o], 1e-6, first), 0)
        << names[o] << ": elements off; the first: " << first;
  }
  int differ = 0;
  for (size_t i = 0; i < (*ref)[0].data.size(); ++i)
    differ += (*ref)[0].data[i] != (*ref)[3].data[i];
  EXPECT_GE(differ, n * n / 2) << "rounding to bf16 first changed too few codes";
}

// gpt.fp8_cast_transpose of an f32 tensor with rounded_to = bf16 (an f32
// master weight's cast, fp8-fold-input-cast) on CUDA: whole 64 x 64
// tiles take the tiled kernel, each thread's 8 elements as two 16-byte
// f32 vectors (the bf16 kernel loads one), each element rounded to bf16
// before the e4m3 conversion. The codes are the Host's (checked against
// the unfolded casts in HostTrainTest.Fp8FoldedWeightCastsTrainBitIdentical;
// on an H100 the 1.5B run's 200 losses were the unfolded run's bits).
TEST_F(LoweringTest, Fp8CastTransposeOfF32OnCudaRoundsToBf16) {
  std::string w = "tensor<128x64xf32>", q = "tensor<128x64xf8E4M3FN>", qt = "tensor<64x128xf8E4M3FN>";
  auto ptxOf = [&](bool rounded) {
    module = parse(
        std::string(kStubPrograms) +
        "func.func @train_step(%w: " + w + " {gpt.input = \"w\"}, %s: tensor<f32> {gpt.input = \"s\"}) -> (" +
        "tensor<128x128xf32> {gpt.output = \"qq\"}, tensor<64x64xf32> {gpt.output = \"tt\"}) {\n"
        "  %q, %qt = gpt.fp8_cast_transpose e4m3 %w, %s" + (rounded ? " {rounded_to = bf16}" : "") +
        " : (" + w + ", tensor<f32>) -> (" + q + ", " + qt + ")\n"
        // Both layouts read, so the kernel writes both.
        "  %qq = gpt.scaled_matmul %q, %s, %q, %s {transpose_rhs} : (" + q + ", tensor<f32>, " + q +
        ", tensor<f32>) -> tensor<128x128xf32>\n"
        "  %tt = gpt.scaled_matmul %qt, %s, %qt, %s {transpose_rhs} : (" + qt + ", tensor<f32>, " +
        qt + ", tensor<f32>) -> tensor<64x64xf32>\n"
        "  return %qq, %tt : tensor<128x128xf32>, tensor<64x64xf32>\n}\n");
    if (!module || !planPrograms())
      return std::string();
    auto bytes = codegen::emitExecutable(*module, codegen::EmitOptions{});
    EXPECT_TRUE(mlir::succeeded(bytes)) << diagnostics;
    if (mlir::failed(bytes))
      return std::string();
    std::string all(bytes->begin(), bytes->end());
    size_t at = all.find(".entry fp8_cast_transpose");
    if (at == std::string::npos)
      return std::string();
    return all.substr(at, all.find(".entry", at + 1) - at);
  };
  auto count = [](const std::string &body, const std::string &what) {
    int n = 0;
    for (size_t at = body.find(what); at != std::string::npos; at = body.find(what, at + 1))
      ++n;
    return n;
  };
  std::string rounded = ptxOf(true);
  ASSERT_FALSE(rounded.empty()) << "no tiled fp8_cast_transpose kernel";
  EXPECT_EQ(count(rounded, "ld.global.v4.b32"), 4) << "two 16-byte loads per 8 elements, twice";
  EXPECT_EQ(count(rounded, "cvt.rn.bf16.f32"), 16) << "each of the 16 elements rounded to bf16";
  EXPECT_GT(count(rounded, "cvt.rn.satfinite.e4m3x2.f32"), 0);
  // Without rounded_to the f32 values go to e4m3 as they are.
  std::string plain = ptxOf(false);
  ASSERT_FALSE(plain.empty());
  EXPECT_EQ(count(plain, "ld.global.v4.b32"), 4);
  EXPECT_EQ(count(plain, "cvt.rn.bf16.f32"), 0);
}

// gpt.fp8_cross_entropy_grad's rows kernel (from the forward's saved
// log-sum-exp, and computing its own) and gpt.fp8_transpose's kernel, read
// back through FP8 GEMMs with identities: the dequantized codes of both
// layouts and the inverse scale against the fp64 reference. dloss = 2.5
// makes the scale 57344 * 16 / 2.5; 16 rows of 64 (60 in the vocabulary)
// give the transpose's generic path (not whole 64 x 64 tiles).
TEST_F(LoweringTest, Fp8CrossEntropyGradMatchesTheReference) {
  constexpr int64_t rows = 16, vp = 64;
  std::string l = "tensor<16x64xf32>", q = "tensor<16x64xf8E5M2>", qt = "tensor<64x16xf8E5M2>";
  std::string e = "tensor<64x64xf32>", qe = "tensor<64x64xf8E4M3FN>", e16 = "tensor<16x16xf32>",
              qe16 = "tensor<16x16xf8E4M3FN>", yt = "tensor<64x16xf32>";
  auto grad = [&](const std::string &n, const std::string &logits) {
    return "  %q" + n + ", %i" + n + " = gpt.fp8_cross_entropy_grad %d, " + logits +
           ", %t {vocab_size = 60 : i64} : (tensor<f32>, " + l +
           ", tensor<16xi32>) -> (" + q + ", tensor<f32>)\n"
           "  %qt" + n + " = gpt.fp8_transpose %q" + n + " : (" + q + ") -> " + qt + "\n"
           "  %y" + n + " = gpt.scaled_matmul %q" + n + ", %i" + n + ", %qe, %se {transpose_rhs} : (" +
           q + ", tensor<f32>, " + qe + ", tensor<f32>) -> " + l + "\n"
           "  %yt" + n + " = gpt.scaled_matmul %qt" + n + ", %i" + n + ", %qe16, %se16 {transpose_rhs} : (" +
           qt + ", tensor<f32>, " + qe16 + ", tensor<f32>) -> " + yt + "\n";
  };
  module = parse(
      std::string(kStubPrograms) +
      "func.func @train_step(%x: " + l + " {gpt.input = \"x\"}, %x2: " + l +
      " {gpt.input = \"x2\"}, %t: tensor<16xi32> {gpt.input = \"t\"}, %d: tensor<f32> {gpt.input = \"d\"}, %e: " +
      e + " {gpt.input = \"e\"}, %e16: " + e16 + " {gpt.input = \"e16\"}) -> (tensor<f32> {gpt.output = \"loss\"}, " +
      l + " {gpt.output = \"saved\"}, " + yt + " {gpt.output = \"saved_t\"}, tensor<f32> {gpt.output = \"inverse\"}, " +
      l + " {gpt.output = \"online\"}, " + yt + " {gpt.output = \"online_t\"}) {\n"
      "  %fe, %se = gpt.fp8_scale e4m3 %e : (" + e + ") -> (tensor<f32>, tensor<f32>)\n"
      "  %qe = gpt.fp8_quantize e4m3 %e, %fe : (" + e + ", tensor<f32>) -> " + qe + "\n"
      "  %fe16, %se16 = gpt.fp8_scale e4m3 %e16 : (" + e16 + ") -> (tensor<f32>, tensor<f32>)\n"
      "  %qe16 = gpt.fp8_quantize e4m3 %e16, %fe16 : (" + e16 + ", tensor<f32>) -> " + qe16 + "\n"
      "  %loss = gpt.cross_entropy %x, %t {vocab_size = 60 : i64} : (" + l + ", tensor<16xi32>) -> tensor<f32>\n" +
      grad("1", "%x") + grad("2", "%x2") +
      "  return %loss, %y1, %yt1, %i1, %y2, %yt2 : tensor<f32>, " + l + ", " + yt + ", tensor<f32>, " +
      l + ", " + yt + "\n}\n");
  ASSERT_TRUE(module);

  std::vector<float> xs(rows * vp), x2s(rows * vp), id(vp * vp, 0.0f), id16(rows * rows, 0.0f);
  std::vector<int32_t> ts(rows);
  for (int64_t i = 0; i < rows * vp; ++i) {
    xs[i] = static_cast<float>(3.0 * std::sin(0.37 * static_cast<double>(i)));
    x2s[i] = static_cast<float>(6.0 * std::cos(0.11 * static_cast<double>(i * i % 97)));
  }
  for (int64_t r = 0; r < rows; ++r)
    ts[r] = static_cast<int32_t>((r * 7) % 60);
  for (int64_t i = 0; i < vp; ++i)
    id[i * vp + i] = 1.0f;
  for (int64_t i = 0; i < rows; ++i)
    id16[i * rows + i] = 1.0f;
  std::vector<float> dloss = {2.5f};

  auto fn = module->lookupSymbol<mlir::func::FuncOp>("train_step");
  ASSERT_TRUE(fn);
  auto ref = reference::evaluate(fn,
                                 {asTensor({rows, vp}, xs), asTensor({rows, vp}, x2s),
                                  asTensor({rows}, ts), asTensor({}, dloss),
                                  asTensor({vp, vp}, id), asTensor({rows, rows}, id16)},
                                 reference::Precision::F64);
  ASSERT_TRUE(mlir::succeeded(ref)) << diagnostics;

  auto session = hostSession("fp8-cross-entropy-grad-host.fb");
  ASSERT_TRUE(session);
  ASSERT_TRUE(session->setInput("train_step", "x", xs));
  ASSERT_TRUE(session->setInput("train_step", "x2", x2s));
  ASSERT_TRUE(session->setInput("train_step", "t", ts));
  ASSERT_TRUE(session->setInput("train_step", "d", dloss));
  ASSERT_TRUE(session->setInput("train_step", "e", id));
  ASSERT_TRUE(session->setInput("train_step", "e16", id16));
  Status ran = session->run("train_step");
  ASSERT_TRUE(ran) << ran.message();

  // The inverse is the bound's: |dloss| / rows / 57344.
  EXPECT_DOUBLE_EQ((*ref)[3].data[0], 2.5 / rows / 57344.0);
  const char *names[] = {"loss", "saved", "saved_t", "inverse", "online", "online_t"};
  // Codes agree exactly; the f32 inverse and loss to rounding.
  for (size_t o = 0; o < std::size(names); ++o) {
    std::string first;
    EXPECT_EQ(elementsOff(*session, names[o], (*ref)[o], 1e-6, first), 0)
        << names[o] << ": elements off; the first: " << first;
    EXPECT_LT(llvm::count((*ref)[o].data, 0.0), static_cast<long>((*ref)[o].data.size()))
        << names[o] << " is all zeros";
  }

  // A dloss so small that 57344 rows / |dloss| overflows f32: scale 1 (no
  // NaN codes from 0 * inf), as in the reference.
  std::vector<float> tiny = {1e-38f};
  ASSERT_TRUE(session->setInput("train_step", "d", tiny));
  ran = session->run("train_step");
  ASSERT_TRUE(ran) << ran.message();
  auto inverse = session->getOutput("train_step", "inverse");
  ASSERT_TRUE(inverse) << inverse.status().message();
  float inv;
  std::memcpy(&inv, inverse->data(), 4);
  EXPECT_EQ(inv, 1.0f);
  for (const char *name : {"saved", "online_t"}) {
    auto got = session->getOutput("train_step", name);
    ASSERT_TRUE(got) << name;
    for (size_t i = 0; i < got->size() / 4; ++i) {
      float g;
      std::memcpy(&g, got->data() + 4 * i, 4);
      ASSERT_EQ(g, 0.0f) << name << "[" << i << "]";
    }
  }
}

// gpt-fuse-fp8's cast epilogues on the Host: a GELU gradient with its bias sum, and a
// plain gradient with its sum, each scaled with a history and cast into
// both layouts, then folded by the pass into two
// gpt.fp8_cast_transpose_sum (and a scale reading the GELU gradient's
// inputs). The fused kernels against the fp64 reference of the fused
// graph, and that reference against the unfused graph's: codes (read back
// through FP8 GEMMs with identities), inverse scales and recorded amaxes
// alike, the sums to bf16 rounding (the fused one sums the GELU gradient
// before it is rounded, as the column-sum fusion does). 144 rows: two 64-row chunks
// and a ragged one. The first history is all zeros (the amax kernels read
// dh and pre), the second usable (they do not).
TEST_F(LoweringTest, Fp8CastTransposeSumMatchesTheUnfusedGraph) {
  constexpr int64_t rows = 144, cols = 48;
  std::string x = "tensor<144x48xf32>", xb = "tensor<144x48xbf16>", q = "tensor<144x48xf8E5M2>",
              qt = "tensor<48x144xf8E5M2>", e = "tensor<48x48xf32>",
              qe = "tensor<48x48xf8E4M3FN>", e2 = "tensor<144x144xf32>",
              qe2 = "tensor<144x144xf8E4M3FN>", xt = "tensor<48x144xf32>", h = "tensor<4xf32>";
  auto castOf = [&](const std::string &n, const std::string &g, const std::string &hist) {
    return "  %db" + n + " = gpt.reduce sum " + g + " dims [0] : (" + xb +
           ") -> tensor<48xbf16>\n"
           "  %s" + n + ", %i" + n + ", %h" + n + " = gpt.fp8_scale e5m2 " + g + " history " +
           hist + " : (" + xb + ", " + h + ") -> (tensor<f32>, tensor<f32>, " + h + ")\n"
           "  %q" + n + ", %qt" + n + ", %r" + n + " = gpt.fp8_cast_transpose e5m2 " + g + ", %s" +
           n + " history %h" + n + " : (" + xb + ", tensor<f32>, " + h + ") -> (" + q + ", " + qt +
           ", " + h + ")\n"
           "  %y" + n + " = gpt.scaled_matmul %q" + n + ", %i" + n + ", %qe, %se {transpose_rhs} : (" +
           q + ", tensor<f32>, " + qe + ", tensor<f32>) -> " + x + "\n"
           "  %yt" + n + " = gpt.scaled_matmul %qt" + n + ", %i" + n + ", %qe2, %se2 {transpose_rhs} : (" +
           qt + ", tensor<f32>, " + qe2 + ", tensor<f32>) -> " + xt + "\n"
           "  %sum" + n + " = gpt.cast %db" + n + " : tensor<48xbf16> to tensor<48xf32>\n";
  };
  auto outs = [&](const std::string &n) {
    return x + " {gpt.output = \"codes" + n + "\"}, " + xt + " {gpt.output = \"codes_t" + n +
           "\"}, tensor<48xf32> {gpt.output = \"sum" + n + "\"}, tensor<f32> {gpt.output = \"inverse" +
           n + "\"}, " + h + " {gpt.output = \"recorded" + n + "\"}";
  };
  std::string text =
      std::string(kStubPrograms) +
      "func.func @train_step(%dh: " + x + " {gpt.input = \"dh\"}, %pre: " + x +
      " {gpt.input = \"pre\"}, %dy: " + x + " {gpt.input = \"dy\"}, %h0: " + h +
      " {gpt.input = \"h0\"}, %hd: " + h + " {gpt.input = \"hd\"}, %e: " + e +
      " {gpt.input = \"e\"}, %e2: " + e2 + " {gpt.input = \"e2\"}) -> (" + outs("1") + ", " +
      outs("2") + ") {\n"
      "  %dhb = gpt.cast %dh : " + x + " to " + xb + "\n"
      "  %preb = gpt.cast %pre : " + x + " to " + xb + "\n"
      "  %dyb = gpt.cast %dy : " + x + " to " + xb + "\n"
      "  %fe, %se = gpt.fp8_scale e4m3 %e : (" + e + ") -> (tensor<f32>, tensor<f32>)\n"
      "  %qe = gpt.fp8_quantize e4m3 %e, %fe : (" + e + ", tensor<f32>) -> " + qe + "\n"
      "  %fe2, %se2 = gpt.fp8_scale e4m3 %e2 : (" + e2 + ") -> (tensor<f32>, tensor<f32>)\n"
      "  %qe2 = gpt.fp8_quantize e4m3 %e2, %fe2 : (" + e2 + ", tensor<f32>) -> " + qe2 + "\n"
      // Copies: a history recorded in place would make its input the
      // output's tensor (named after it).
      "  %h0n = gpt.neg %h0 : " + h + "\n  %h0c = gpt.neg %h0n : " + h + "\n"
      "  %hdn = gpt.neg %hd : " + h + "\n  %hdc = gpt.neg %hdn : " + h + "\n"
      "  %g = gpt.gelu_grad %dhb, %preb : " + xb + "\n" + castOf("1", "%g", "%h0c") +
      castOf("2", "%dyb", "%hdc") +
      "  return %y1, %yt1, %sum1, %i1, %r1, %y2, %yt2, %sum2, %i2, %r2 : " + x + ", " + xt +
      ", tensor<48xf32>, tensor<f32>, " + h + ", " + x + ", " + xt + ", tensor<48xf32>, tensor<f32>, " +
      h + "\n}\n";
  module = parse(text);
  ASSERT_TRUE(module);

  std::vector<float> dh(rows * cols), pre(rows * cols), dy(rows * cols), id(cols * cols, 0.0f),
      id2(rows * rows, 0.0f);
  for (int64_t i = 0; i < rows * cols; ++i) {
    double d = static_cast<double>(i);
    dh[i] = static_cast<float>(1e-3 * std::sin(0.37 * d));
    pre[i] = static_cast<float>(3.0 * std::cos(0.11 * static_cast<double>(i * i % 97)));
    dy[i] = static_cast<float>(2e-2 * std::sin(0.053 * d + 1.0));
  }
  for (int64_t i = 0; i < cols; ++i)
    id[i * cols + i] = 1.0f;
  for (int64_t i = 0; i < rows; ++i)
    id2[i * rows + i] = 1.0f;
  std::vector<float> h0(4, 0.0f), hd = {0.0f, 0.03f, 0.01f, 0.0f};
  std::vector<Tensor> inputs = {asTensor({rows, cols}, dh), asTensor({rows, cols}, pre),
                                asTensor({rows, cols}, dy), asTensor({4}, h0),
                                asTensor({4}, hd), asTensor({cols, cols}, id),
                                asTensor({rows, rows}, id2)};
  auto evaluate = [&] {
    auto fn = module->lookupSymbol<mlir::func::FuncOp>("train_step");
    return reference::evaluate(fn, inputs, reference::Precision::F64);
  };
  auto unfused = evaluate();
  ASSERT_TRUE(mlir::succeeded(unfused)) << diagnostics;

  mlir::PassManager pm(&context);
  FuseFp8PassOptions castEpilogues;
  castEpilogues.enablePatterns = {"fp8-cast-gelu-grad", "fp8-cast-column-sum"};
  pm.addPass(createFuseFp8Pass(castEpilogues));
  ASSERT_TRUE(mlir::succeeded(pm.run(*module))) << diagnostics;
  int sums = 0, folded = 0, others = 0;
  module->walk([&](mlir::Operation *op) {
    if (auto cs = llvm::dyn_cast<mlir::gpt::Fp8CastTransposeSumOp>(op)) {
      ++sums;
      folded += static_cast<bool>(cs.getPre());
    }
    others += llvm::isa<mlir::gpt::GeluGradOp, mlir::gpt::ReduceOp,
                        mlir::gpt::Fp8CastTransposeOp>(op);
  });
  EXPECT_EQ(sums, 2);
  EXPECT_EQ(folded, 1);
  EXPECT_EQ(others, 0);
  auto fused = evaluate();
  ASSERT_TRUE(mlir::succeeded(fused)) << diagnostics;

  auto session = hostSession("fp8-cast-transpose-sum-host.fb");
  ASSERT_TRUE(session);
  ASSERT_TRUE(session->setInput("train_step", "dh", dh));
  ASSERT_TRUE(session->setInput("train_step", "pre", pre));
  ASSERT_TRUE(session->setInput("train_step", "dy", dy));
  ASSERT_TRUE(session->setInput("train_step", "h0", h0));
  ASSERT_TRUE(session->setInput("train_step", "hd", hd));
  ASSERT_TRUE(session->setInput("train_step", "e", id));
  ASSERT_TRUE(session->setInput("train_step", "e2", id2));
  Status ran = session->run("train_step");
  ASSERT_TRUE(ran) << ran.message();

  const char *names[] = {"codes1", "codes_t1", "sum1", "inverse1", "recorded1",
                         "codes2", "codes_t2", "sum2", "inverse2", "recorded2"};
  // The GELU gradient's sums: the unfused graph adds its bf16-rounded
  // terms, so they differ by up to 2^-9 of each term (bounded through the
  // dequantized codes, within 2^-3 of the terms), then one bf16 rounding.
  std::vector<double> termBound(cols, 0.0);
  for (int64_t i = 0; i < rows * cols; ++i)
    termBound[i % cols] += std::fabs((*unfused)[0].data[i]) * 1.25 / 512.0;
  for (size_t o = 0; o < std::size(names); ++o) {
    bool sum = o == 2 || o == 7;
    const Tensor &want = (*fused)[o], &before = (*unfused)[o];
    // The fused graph computes what the unfused one did.
    ASSERT_EQ(want.data.size(), before.data.size()) << names[o];
    for (size_t i = 0; i < want.data.size(); ++i) {
      double tolerance = o == 2 ? termBound[i] + std::fabs(before.data[i]) / 128.0
                                : 1e-12 * std::fabs(before.data[i]);
      ASSERT_NEAR(want.data[i], before.data[i], tolerance) << names[o] << "[" << i << "]";
    }
    // The kernels compute the fused graph (sums: one bf16 rounding apart).
    std::string first;
    EXPECT_EQ(elementsOff(*session, names[o], want, sum ? 8e-3 : 1e-6, first), 0)
        << names[o] << ": elements off; the first: " << first;
    EXPECT_LT(llvm::count(want.data, 0.0), static_cast<long>(want.data.size()))
        << names[o] << " is all zeros";
  }
  // The zero history takes the GELU gradient's own amax; the usable one
  // scales by its largest entry, 0.03.
  EXPECT_DOUBLE_EQ((*fused)[8].data[0], static_cast<double>(0.03f) / 57344.0);
  EXPECT_GT((*fused)[4].data[0], 0.0);
}

/// @init and @forward, which every executable needs, and a train_step
/// that quantizes f32 inputs a0, a1 (e5m2, 48x32) and b (e4m3, 16x32) for
/// products a b^T (48x16), followed by `body`.
std::string accumulationModule(const std::string &extraArgs, const std::string &outputs,
                               const std::string &body) {
  std::string text =
      std::string(kStubPrograms) +
      "func.func @train_step(%a0: tensor<48x32xf32> {gpt.input = \"a0\"}, %a1: tensor<48x32xf32> "
      "{gpt.input = \"a1\"}, %b: tensor<16x32xf32> {gpt.input = \"b\"}" + extraArgs + ") -> (" +
      outputs + ") {\n";
  for (auto [v, format, type] : {std::tuple{"a0", "e5m2", "48x32"}, std::tuple{"a1", "e5m2", "48x32"},
                                  std::tuple{"b", "e4m3", "16x32"}}) {
    std::string t = std::string("tensor<") + type + "xf32>";
    std::string q = std::string("tensor<") + type + (format[1] == '5' ? "xf8E5M2>" : "xf8E4M3FN>");
    text += std::string("  %s") + v + ", %i" + v + " = gpt.fp8_scale " + format + " %" + v + " : (" + t +
            ") -> (tensor<f32>, tensor<f32>)\n  %q" + v + " = gpt.fp8_quantize " + format + " %" + v +
            ", %s" + v + " : (" + t + ", tensor<f32>) -> " + q + "\n";
  }
  return text + body + "}\n";
}

/// "%name = gpt.scaled_matmul" of micro-batch `i` (lhs a<i>), with result
/// `type` and an optional accumulator.
std::string product(const std::string &name, int i, const std::string &type,
                    const std::string &acc = "") {
  std::string a = "a" + std::to_string(i);
  return "  %" + name + " = gpt.scaled_matmul %q" + a + ", %i" + a + ", %qb, %ib" +
         (acc.empty() ? "" : " accumulate " + acc) +
         " {transpose_rhs} : (tensor<48x32xf8E5M2>, tensor<f32>, tensor<16x32xf8E4M3FN>, "
         "tensor<f32>" + (acc.empty() ? "" : ", " + type) + ") -> " + type + "\n";
}

std::vector<float> wave(size_t n, double amplitude, double frequency, double phase) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i)
    v[i] = static_cast<float>(amplitude * std::sin(frequency * static_cast<double>(i) + phase));
  return v;
}

// Verify that gpt-fuse-grad-accumulation's graph (the first product in
// f32, the second added to it by the GEMM) computes the unfused sum of
// the bf16 products, within their rounding, and that the Host GEMM's
// beta = 1 computes the fused graph.
TEST_F(LoweringTest, GradAccumulationInTheGemmMatchesTheSum) {
  module = parse(accumulationModule(
      "", "tensor<48x16xf32> {gpt.output = \"sum\"}",
      product("p0", 0, "tensor<48x16xbf16>") + product("p1", 1, "tensor<48x16xbf16>") +
          "  %g0 = gpt.cast %p0 : tensor<48x16xbf16> to tensor<48x16xf32>\n"
          "  %g1 = gpt.cast %p1 : tensor<48x16xbf16> to tensor<48x16xf32>\n"
          "  %sum = gpt.add %g0, %g1 {gpt.micro_batch = 1 : i64} : tensor<48x16xf32>\n"
          "  return %sum : tensor<48x16xf32>\n"));
  ASSERT_TRUE(module);
  std::vector<float> a0 = wave(48 * 32, 0.7, 0.37, 0.0), a1 = wave(48 * 32, 1.3, 0.11, 1.0),
                     b = wave(16 * 32, 0.9, 0.053, 2.0);
  std::vector<Tensor> inputs = {asTensor({48, 32}, a0), asTensor({48, 32}, a1),
                                asTensor({16, 32}, b)};
  auto evaluate = [&] {
    return reference::evaluate(module->lookupSymbol<mlir::func::FuncOp>("train_step"), inputs,
                               reference::Precision::F64);
  };
  auto unfused = evaluate();
  ASSERT_TRUE(mlir::succeeded(unfused)) << diagnostics;

  mlir::PassManager pm(&context);
  pm.addPass(createFuseGradAccumulationPass());
  ASSERT_TRUE(mlir::succeeded(pm.run(*module))) << diagnostics;
  int products = 0, accumulating = 0, others = 0;
  module->walk([&](mlir::Operation *op) {
    if (auto mm = llvm::dyn_cast<mlir::gpt::ScaledMatmulOp>(op)) {
      ++products;
      accumulating += static_cast<bool>(mm.getAccumulate());
    }
    others += llvm::isa<mlir::gpt::CastOp, mlir::gpt::AddOp>(op);
  });
  EXPECT_EQ(products, 2);
  EXPECT_EQ(accumulating, 1);
  EXPECT_EQ(others, 0);
  auto fused = evaluate();
  ASSERT_TRUE(mlir::succeeded(fused)) << diagnostics;
  // Each unfused product was rounded to bf16 (2^-9 of it) before the sum;
  // |product| <= 1.25 sum_k |a_ik b_jk| (e5m2 and e4m3 codes are within
  // 2^-3 and 2^-4 of their values).
  const Tensor &before = (*unfused)[0], &after = (*fused)[0];
  ASSERT_EQ(before.data.size(), after.data.size());
  int moved = 0;
  for (size_t i = 0; i < after.data.size(); ++i) {
    double bound = 0;
    for (int64_t k = 0; k < 32; ++k)
      bound += (std::fabs(a0[i / 16 * 32 + k]) + std::fabs(a1[i / 16 * 32 + k])) *
               std::fabs(b[i % 16 * 32 + k]);
    ASSERT_NEAR(after.data[i], before.data[i], 1.25 * bound / 512.0) << "sum[" << i << "]";
    moved += after.data[i] != before.data[i];
  }
  EXPECT_GT(moved, 0) << "the fused sum should skip the bf16 rounding";

  auto session = hostSession("grad-accumulation-host.fb");
  ASSERT_TRUE(session);
  // Planned in place: the sum's bytes are the first product's.
  module->walk([&](mlir::gpt::ScaledMatmulOp mm) {
    if (!mm.getAccumulate())
      return;
    auto offsets = [](mlir::Operation *op) {
      return op->getAttrOfType<mlir::DenseI64ArrayAttr>("gpt.offsets").asArrayRef()[0];
    };
    EXPECT_EQ(offsets(mm), offsets(mm.getAccumulate().getDefiningOp()));
  });
  ASSERT_TRUE(session->setInput("train_step", "a0", a0));
  ASSERT_TRUE(session->setInput("train_step", "a1", a1));
  ASSERT_TRUE(session->setInput("train_step", "b", b));
  Status ran = session->run("train_step");
  ASSERT_TRUE(ran) << ran.message();
  std::string first;
  EXPECT_EQ(elementsOff(*session, "sum", after, 1e-5, first), 0) << first;
}

// Verify that an accumulator read after its GEMM is not overwritten: the
// GEMM adds into a copy, and the later reader sees the value from before.
TEST_F(LoweringTest, AccumulatorReadAfterTheGemmIsCopied) {
  module = parse(accumulationModule(
      ", %c: tensor<48x16xf32> {gpt.input = \"c\"}",
      "tensor<48x16xf32> {gpt.output = \"sum\"}, tensor<48x16xf32> {gpt.output = \"acc\"}",
      "  %acc = gpt.neg %c : tensor<48x16xf32>\n" +
          product("sum", 1, "tensor<48x16xf32>", "%acc") +
          "  %again = gpt.neg %acc : tensor<48x16xf32>\n"
          "  return %sum, %again : tensor<48x16xf32>, tensor<48x16xf32>\n"));
  ASSERT_TRUE(module);
  std::vector<float> a1 = wave(48 * 32, 1.3, 0.11, 1.0), b = wave(16 * 32, 0.9, 0.053, 2.0),
                     c = wave(48 * 16, 5.0, 0.3, 0.5);
  std::vector<Tensor> inputs = {Tensor({48, 32}, 0.0),
                                asTensor({48, 32}, a1),
                                asTensor({16, 32}, b),
                                asTensor({48, 16}, c)};
  auto want = reference::evaluate(module->lookupSymbol<mlir::func::FuncOp>("train_step"), inputs,
                                  reference::Precision::F64);
  ASSERT_TRUE(mlir::succeeded(want)) << diagnostics;
  auto session = hostSession("accumulator-copied-host.fb");
  ASSERT_TRUE(session);
  ASSERT_TRUE(session->setInput("train_step", "a0", std::vector<float>(48 * 32, 0.0f)));
  ASSERT_TRUE(session->setInput("train_step", "a1", a1));
  ASSERT_TRUE(session->setInput("train_step", "b", b));
  ASSERT_TRUE(session->setInput("train_step", "c", c));
  Status ran = session->run("train_step");
  ASSERT_TRUE(ran) << ran.message();
  std::string first;
  EXPECT_EQ(elementsOff(*session, "sum", (*want)[0], 1e-5, first), 0) << first;
  EXPECT_EQ(elementsOff(*session, "acc", (*want)[1], 0.0, first), 0) << first;
}

} // namespace

//===- TestUtils.h - helpers for the GoogleTest suites --------------------===//

#ifndef GPTC_TEST_UNIT_TESTUTILS_H
#define GPTC_TEST_UNIT_TESTUTILS_H

#include "compiler/Pipelines/Pipelines.h"
#include "compiler/Reference/Interpreter.h"
#include "compiler/Transforms/Passes.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/Support/MemoryBuffer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>
#include <string>

namespace gptc::testing {

/// An MLIR context with the gpt dialect that records diagnostics.
class ReferenceTest : public ::testing::Test {
protected:
  ReferenceTest() : context(makeRegistry()) {
    context.loadAllAvailableDialects();
    handler = std::make_unique<mlir::ScopedDiagnosticHandler>(
        &context, [this](mlir::Diagnostic &d) {
          diagnostics += d.str() + "\n";
          return mlir::success();
        });
  }

  static mlir::DialectRegistry makeRegistry() {
    mlir::DialectRegistry registry;
    registerDialects(registry);
    return registry;
  }

  mlir::OwningOpRef<mlir::ModuleOp> parse(llvm::StringRef source) {
    auto module = mlir::parseSourceString<mlir::ModuleOp>(source, &context);
    EXPECT_TRUE(module) << diagnostics;
    return module;
  }

  /// Evaluates @f of `source` and returns its first result.
  reference::Tensor run(llvm::StringRef source, std::vector<reference::Tensor> args,
                        reference::Precision precision = reference::Precision::F64) {
    module = parse(source);
    if (!module)
      return {};
    auto fn = module->lookupSymbol<mlir::func::FuncOp>("f");
    auto results = reference::evaluate(fn, args, precision);
    EXPECT_TRUE(mlir::succeeded(results)) << diagnostics;
    return mlir::succeeded(results) ? (*results)[0] : reference::Tensor();
  }

  /// Runs gpt-plan-memory on every function of `module` (after `before`'s
  /// passes), as codegen needs.
  bool planPrograms(std::function<void(mlir::PassManager &)> before = {}) {
    mlir::PassManager pm(&context);
    if (before)
      before(pm);
    pm.addNestedPass<mlir::func::FuncOp>(createPlanMemoryPass());
    bool planned = mlir::succeeded(pm.run(*module));
    EXPECT_TRUE(planned) << diagnostics;
    return planned;
  }

  mlir::MLIRContext context;
  mlir::OwningOpRef<mlir::ModuleOp> module;
  std::unique_ptr<mlir::ScopedDiagnosticHandler> handler;
  std::string diagnostics;
};

/// The records of test/fixtures/gpt2_tiny.txt (see make_gpt2_fixture.py).
struct Fixture {
  std::map<std::string, int64_t> config;
  std::map<std::string, double> adamw;
  std::vector<double> tokens, targets, trainLosses;
  double lossFp64 = 0, lossFp32 = 0;
  std::map<std::string, reference::Tensor> params, grads;
};

inline bool readFixture(const std::string &path, Fixture &f, std::string &error) {
  std::ifstream in(path);
  if (!in) {
    error = "cannot open " + path;
    return false;
  }
  auto readTensor = [](std::istringstream &is) {
    std::string name;
    int rank;
    is >> name >> rank;
    std::vector<int64_t> shape(rank);
    for (int64_t &d : shape)
      is >> d;
    reference::Tensor t(shape);
    for (double &x : t.data)
      is >> x;
    return std::make_pair(name, t);
  };
  auto readList = [](std::istringstream &is, std::vector<double> &dst) {
    int64_t n;
    is >> n;
    dst.resize(n);
    for (double &x : dst)
      is >> x;
  };
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream is(line);
    std::string kind, key;
    is >> kind;
    if (kind == "config") {
      int64_t value;
      while (is >> key >> value)
        f.config[key] = value;
    } else if (kind == "adamw") {
      double value;
      while (is >> key >> value)
        f.adamw[key] = value;
    } else if (kind == "tokens") {
      readList(is, f.tokens);
    } else if (kind == "targets") {
      readList(is, f.targets);
    } else if (kind == "train_loss_fp64") {
      readList(is, f.trainLosses);
    } else if (kind == "loss_fp64") {
      is >> f.lossFp64;
    } else if (kind == "loss_fp32") {
      is >> f.lossFp32;
    } else if (kind == "param" || kind == "grad") {
      auto [name, t] = readTensor(is);
      (kind == "param" ? f.params : f.grads)[name] = t;
    }
    if (is.fail() && !is.eof()) {
      error = "malformed line: " + line.substr(0, 60);
      return false;
    }
  }
  return true;
}

/// models/gpt2.mlir compiled through some phase, with helpers to run it.
class GPT2Test : public ReferenceTest {
public:
  /// Parses models/gpt2.mlir and runs every phase up to `phase`; `extra`
  /// may add passes after them. The options start as fp32 on one device
  /// (no collectives), the references the tests compare against.
  bool compile(const std::string &preset, Phase phase,
               std::function<void(CompileOptions &)> configure = {},
               std::function<void(mlir::PassManager &)> extra = {}) {
    std::string error;
    auto file = mlir::openInputFile(GPTC_SOURCE_DIR "/models/gpt2.mlir", &error);
    EXPECT_TRUE(file) << error;
    if (!file)
      return false;
    module = parse(file->getBuffer());
    if (!module)
      return false;
    mlir::PassManager pm(&context);
    CompileOptions options;
    options.model = preset;
    options.precision = PrecisionPolicy::Fp32;
    options.worldSize = 0;
    if (configure)
      configure(options);
    buildPipeline(pm, options, phase);
    if (extra)
      extra(pm);
    bool ok = mlir::succeeded(pm.run(*module));
    EXPECT_TRUE(ok) << diagnostics;
    return ok;
  }

  mlir::func::FuncOp function(llvm::StringRef name) {
    auto fn = module->lookupSymbol<mlir::func::FuncOp>(name);
    EXPECT_TRUE(fn) << "no @" << name.str();
    return fn;
  }

  std::vector<reference::Tensor> evaluate(llvm::StringRef name,
                                          const std::vector<reference::Tensor> &args,
                                          reference::Precision p = reference::Precision::F64) {
    auto results = reference::evaluate(function(name), args, p);
    EXPECT_TRUE(mlir::succeeded(results)) << diagnostics;
    return mlir::succeeded(results) ? *results : std::vector<reference::Tensor>();
  }

  /// The index of the result of @`fn` named `name` by gpt.output.
  size_t output(llvm::StringRef fn, llvm::StringRef name) {
    mlir::func::FuncOp f = function(fn);
    for (unsigned i = 0; i < f.getNumResults(); ++i)
      if (auto n = f.getResultAttrOfType<mlir::StringAttr>(i, "gpt.output"); n && n == name)
        return i;
    ADD_FAILURE() << "@" << fn.str() << " has no output " << name.str();
    return 0;
  }

  /// Arguments of `fn` filled from `f` by gpt.param / gpt.input name.
  std::vector<reference::Tensor> fixtureArgs(mlir::func::FuncOp fn, const Fixture &f) {
    std::vector<reference::Tensor> args;
    for (const std::string &name : reference::getArgumentNames(fn)) {
      if (name == "tokens" || name == "targets") {
        args.push_back(reference::Tensor({f.config.at("batch"), f.config.at("seq")},
                                         name == "tokens" ? f.tokens : f.targets));
        continue;
      }
      auto it = f.params.find(name);
      EXPECT_NE(it, f.params.end()) << "fixture lacks parameter " << name;
      args.push_back(it == f.params.end() ? reference::Tensor() : it->second);
    }
    return args;
  }
};

class GPT2FixtureTest : public GPT2Test {
protected:
  void SetUp() override {
    std::string error;
    ASSERT_TRUE(readFixture(GPTC_SOURCE_DIR "/test/fixtures/gpt2_tiny.txt", fixture, error))
        << error;
    ASSERT_EQ(fixture.config.at("n_layer"), 2);
    ASSERT_EQ(fixture.config.at("padded_vocab_size"), 64);
  }
  Fixture fixture;
};

/// ||a - b|| / ||b||.
inline double relativeError(const reference::Tensor &a, const reference::Tensor &b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < b.data.size(); ++i) {
    num += (a.data[i] - b.data[i]) * (a.data[i] - b.data[i]);
    den += b.data[i] * b.data[i];
  }
  return std::sqrt(num) / std::max(std::sqrt(den), 1e-300);
}

inline void expectNear(const reference::Tensor &t, const std::vector<double> &want,
                       double tol) {
  ASSERT_EQ(t.data.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i)
    EXPECT_NEAR(t.data[i], want[i], tol) << "element " << i;
}

/// The @init and @forward programs an executable needs, as stubs: for
/// modules whose @train_step is the test.
constexpr const char *kStubPrograms =
    "func.func @init(%a: tensor<4xf32> {gpt.input = \"a\"}) -> (tensor<4xf32> {gpt.output = \"b\"}) {\n"
    "  %b = gpt.neg %a : tensor<4xf32>\n  return %b : tensor<4xf32>\n}\n"
    "func.func @forward(%a: tensor<4xf32> {gpt.input = \"a\"}) -> (tensor<4xf32> {gpt.output = \"b\"}) {\n"
    "  %b = gpt.neg %a : tensor<4xf32>\n  return %b : tensor<4xf32>\n}\n";

} // namespace gptc::testing

#endif // GPTC_TEST_UNIT_TESTUTILS_H

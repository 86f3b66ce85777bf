//===- TestUtils.h - helpers for reference-interpreter tests -------------===//

#ifndef GPTC_TEST_UNIT_COMPILER_REFERENCE_TESTUTILS_H
#define GPTC_TEST_UNIT_COMPILER_REFERENCE_TESTUTILS_H

#include "compiler/Pipelines/Pipelines.h"
#include "compiler/Reference/Interpreter.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"

#include <gtest/gtest.h>

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

  mlir::MLIRContext context;
  mlir::OwningOpRef<mlir::ModuleOp> module;
  std::unique_ptr<mlir::ScopedDiagnosticHandler> handler;
  std::string diagnostics;
};

inline void expectNear(const reference::Tensor &t, const std::vector<double> &want,
                       double tol) {
  ASSERT_EQ(t.data.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i)
    EXPECT_NEAR(t.data[i], want[i], tol) << "element " << i;
}

} // namespace gptc::testing

#endif // GPTC_TEST_UNIT_COMPILER_REFERENCE_TESTUTILS_H

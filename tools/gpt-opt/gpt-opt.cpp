//===- gpt-opt.cpp - mlir-opt with the gpt dialect and passes ------------===//

#include "compiler/Pipelines/Pipelines.h"
#include "runtime/support/Version.h"

#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/raw_ostream.h"

namespace {

const char *kOverview = R"(gpt-opt: the gpt dialect's optimizer driver

Examples:
  gpt-opt models/gpt2.mlir --gpt-instantiate-model=model=tiny
  gpt-opt models/gpt2.mlir --gpt-import-pipeline=model=tiny --gpt-decompose-attention
  gpt-opt in.mlir --split-input-file --verify-diagnostics
)";

} // namespace

int main(int argc, char **argv) {
  mlir::DialectRegistry registry;
  gptc::registerDialects(registry);
  gptc::registerPasses();
  // --version prints LLVM's version; ours goes after it.
  llvm::cl::AddExtraVersionPrinter([](llvm::raw_ostream &os) {
    os << "gpt-opt (gptc " << gptc::versionString() << ")\n";
  });
  return mlir::asMainReturnCode(mlir::MlirOptMain(argc, argv, kOverview, registry));
}

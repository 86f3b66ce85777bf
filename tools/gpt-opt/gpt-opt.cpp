//===- gpt-opt.cpp - mlir-opt with the gpt dialect and passes ------------===//

#include "compiler/Pipelines/Pipelines.h"

#include "mlir/Tools/mlir-opt/MlirOptMain.h"

int main(int argc, char **argv) {
  mlir::DialectRegistry registry;
  gptc::registerDialects(registry);
  gptc::registerPasses();
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "gpt-opt: the gpt dialect's optimizer driver\n",
                        registry));
}

//===- ProgramUtils.cpp - helpers of the passes that add programs ---------===//

#include "compiler/Transforms/ProgramUtils.h"

#include "mlir/IR/SymbolTable.h"

using namespace mlir;

namespace gptc {

func::FuncOp programSource(ModuleOp module, llvm::StringRef pass, llvm::StringRef source,
                           llvm::StringRef created) {
  SymbolTable symbols(module);
  auto fn = symbols.lookup<func::FuncOp>(source);
  if (!fn) {
    module.emitError() << pass << ": no function @" << source;
    return nullptr;
  }
  if (symbols.lookup(created)) {
    module.emitError() << pass << ": @" << created << " already exists";
    return nullptr;
  }
  return fn;
}

bool availableBefore(mlir::Value v, mlir::Operation *op) {
  if (auto arg = llvm::dyn_cast<mlir::BlockArgument>(v))
    return arg.getOwner() == op->getBlock();
  mlir::Operation *def = v.getDefiningOp();
  return def->getBlock() == op->getBlock() && def->isBeforeInBlock(op);
}

} // namespace gptc

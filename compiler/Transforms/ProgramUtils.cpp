//===- ProgramUtils.cpp - helpers shared by the compiler passes -----------===//

#include "compiler/Transforms/ProgramUtils.h"

#include "mlir/IR/SymbolTable.h"
#include "llvm/Support/FormatVariadic.h"

#include <cmath>

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

Value reshapeSource(Value v) {
  while (auto reshape = v.getDefiningOp<gpt::ReshapeOp>())
    v = reshape.getInput();
  return v;
}

SmallVector<OpOperand *> usesThroughReshapes(Value v, SmallVectorImpl<Operation *> &views) {
  SmallVector<OpOperand *> uses;
  SmallVector<Value> work = {v};
  while (!work.empty()) {
    for (OpOperand &use : work.pop_back_val().getUses()) {
      if (auto reshape = llvm::dyn_cast<gpt::ReshapeOp>(use.getOwner())) {
        views.push_back(reshape);
        work.push_back(reshape.getResult());
      } else {
        uses.push_back(&use);
      }
    }
  }
  return uses;
}

Operation *cloneFp8Quantization(OpBuilder &b, Operation *op, Value history,
                                const IRMapping &map) {
  if (auto q = llvm::dyn_cast<gpt::Fp8QuantizeOp>(op))
    return gpt::Fp8QuantizeOp::create(b, q.getLoc(), q.getFormat(),
                                      map.lookupOrDefault(q.getInput()),
                                      map.lookupOrDefault(q.getScale()), history,
                                      q.getTranspose(), q.getGelu());
  auto ct = llvm::cast<gpt::Fp8CastTransposeOp>(op);
  return gpt::Fp8CastTransposeOp::create(b, ct.getLoc(), ct.getFormat(),
                                         map.lookupOrDefault(ct.getInput()),
                                         map.lookupOrDefault(ct.getScale()), history,
                                         ct.getGelu(), ct.getRoundedToAttr());
}

std::string formatBytes(int64_t bytes) {
  double b = static_cast<double>(bytes);
  constexpr double kKiB = 1024.0;
  if (std::abs(b) >= kKiB * kKiB * kKiB)
    return llvm::formatv("{0:f2} GiB", b / (kKiB * kKiB * kKiB)).str();
  if (std::abs(b) >= kKiB * kKiB)
    return llvm::formatv("{0:f2} MiB", b / (kKiB * kKiB)).str();
  if (std::abs(b) >= kKiB)
    return llvm::formatv("{0:f2} KiB", b / kKiB).str();
  return llvm::formatv("{0} B", bytes).str();
}

bool availableBefore(mlir::Value v, mlir::Operation *op) {
  if (auto arg = llvm::dyn_cast<mlir::BlockArgument>(v))
    return arg.getOwner() == op->getBlock();
  mlir::Operation *def = v.getDefiningOp();
  return def->getBlock() == op->getBlock() && def->isBeforeInBlock(op);
}

mlir::gpt::FusionOp createFusion(mlir::OpBuilder &b, mlir::Location loc,
                                 mlir::TypeRange results, mlir::ValueRange inputs) {
  auto fusion = mlir::gpt::FusionOp::create(b, loc, results, inputs);
  mlir::Block *body = b.createBlock(&fusion.getBody());
  for (mlir::Value v : inputs)
    body->addArgument(v.getType(), v.getLoc());
  return fusion;
}

mlir::Value castElements(mlir::OpBuilder &b, mlir::Location loc, mlir::Value v, mlir::Type elt) {
  auto t = llvm::cast<mlir::RankedTensorType>(v.getType());
  if (t.getElementType() == elt)
    return v;
  return mlir::gpt::CastOp::create(b, loc, t.clone(elt), v);
}

} // namespace gptc

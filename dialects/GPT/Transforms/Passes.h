//===- Passes.h - gpt dialect passes -------------------------------------===//

#ifndef GPTC_DIALECTS_GPT_TRANSFORMS_PASSES_H
#define GPTC_DIALECTS_GPT_TRANSFORMS_PASSES_H

#include "dialects/GPT/IR/GPTOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Pass/Pass.h"

namespace mlir::gpt {

#define GEN_PASS_DECL
#include "dialects/GPT/Transforms/Passes.h.inc"

/// Patterns that expand gpt.causal_attention into its unfused form.
void populateDecomposeAttentionPatterns(RewritePatternSet &patterns);

#define GEN_PASS_REGISTRATION
#include "dialects/GPT/Transforms/Passes.h.inc"

} // namespace mlir::gpt

#endif // GPTC_DIALECTS_GPT_TRANSFORMS_PASSES_H

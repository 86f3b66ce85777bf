//===- GPTBase.td - gpt dialect, base classes and type constraints -------===//
//
// The `gpt` dialect describes a GPT-2 training step at the tensor level.
//
//   models/gpt2.mlir (generic over the config, `?` dims, #gpt.cfg refs)
//     --gpt-instantiate-model-->  static shapes, one function, named params
//     --gpt-autodiff / optimizer / precision / fusion ... (later phases)
//
//===----------------------------------------------------------------------===//

#ifndef GPT_BASE_TD
#define GPT_BASE_TD

include "mlir/IR/OpBase.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/EnumAttr.td"

def GPT_Dialect : Dialect {
  let name = "gpt";
  let cppNamespace = "::mlir::gpt";
  let summary = "Tensor-level ops for a GPT-2 forward graph, loss and train step";
  let description = [{
    The `gpt` dialect holds the GPT-2 model as the compiler sees it first: a
    graph of coarse, named ops (`gpt.embed`, `gpt.layernorm`, `gpt.linear`,
    `gpt.causal_attention`, `gpt.cross_entropy`, ...) over builtin ranked
    tensors, plus the small elementwise/reduction/layout ops that
    decompositions and later passes (autodiff, precision, fusion) produce.

    A model file is generic over its configuration: dimensions are `?` and
    config-dependent integers are `#gpt.cfg<"name">` references. The
    `gpt-instantiate-model` pass picks a preset (or flags) and produces a
    single function with static shapes, whose arguments carry `gpt.param` /
    `gpt.input` names.

    Every op infers its result type from its operands, so verifiers and the
    instantiation pass share one set of shape rules.
  }];
  let useDefaultAttributePrinterParser = 1;
  let hasConstantMaterializer = 1;
}

class GPT_Op<string mnemonic, list<Trait> traits = []>
    : Op<GPT_Dialect, mnemonic, traits>;

class GPT_Attr<string name, string attrMnemonic, list<Trait> traits = []>
    : AttrDef<GPT_Dialect, name, traits> {
  let mnemonic = attrMnemonic;
}

//===----------------------------------------------------------------------===//
// Type constraints
//===----------------------------------------------------------------------===//

def GPT_Float : AnyTypeOf<[F16, BF16, F32, F64]>;
def GPT_FloatTensor : RankedTensorOf<[F16, BF16, F32, F64]>;
def GPT_IndexTensor : RankedTensorOf<[I32]>;
def GPT_AnyTensor : RankedTensorOf<[F16, BF16, F32, F64, I32]>;
def GPT_Scalar : 0DTensorOf<[F16, BF16, F32, F64]>;

// Layernorm's epsilon: 0, a negative or a NaN one divides by zero or takes
// the square root of a negative variance.
def GPT_EpsilonAttr : ConfinedAttr<F64Attr, [AttrConstraint<
    CPred<"::llvm::cast<::mlir::FloatAttr>($_self).getValueAsDouble() > 0 && "
          "::std::isfinite(::llvm::cast<::mlir::FloatAttr>($_self).getValueAsDouble())">,
    "whose value is a finite number > 0">]>;

#endif // GPT_BASE_TD

//===- InstantiateModel.cpp - generic model file -> static IR ------------===//
//
/// Algorithm:
///  1) Resolve the preset from `gpt.models` plus the batch/seq options.
///  2) Replace every #gpt.cfg reference in the module by its integer.
///  3) For each public function: set static argument types from `gpt.shape`,
///     unroll its gpt.repeat ops (one new parameter argument per block
///     parameter and copy), then re-infer all result types in order.
///  4) Erase the block functions, record gpt.config / gpt.num_parameters.
//
//===----------------------------------------------------------------------===//

#include "dialects/GPT/Transforms/Passes.h"

#include "mlir/IR/AttrTypeSubElements.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/StringExtras.h"

#include <algorithm>
#include <limits>

namespace mlir::gpt {
#define GEN_PASS_DEF_INSTANTIATEMODELPASS
#include "dialects/GPT/Transforms/Passes.h.inc"
} // namespace mlir::gpt

using namespace mlir;
using namespace mlir::gpt;

namespace {

constexpr StringLiteral kModelsAttr = "gpt.models";
constexpr StringLiteral kConfigAttr = "gpt.config";
constexpr StringLiteral kNumParamsAttr = "gpt.num_parameters";

/// A resolved configuration: config keys and shape symbols to integers.
struct Config {
  std::string name;
  llvm::StringMap<int64_t> values;  // n_layer, n_head, ..., batch, seq
  llvm::StringMap<int64_t> symbols; // B, T, C, H, L, V, Vp, maxT
};

FailureOr<Config> resolveConfig(ModuleOp module, StringRef model, int64_t batch,
                                int64_t seq) {
  auto presets = module->getAttrOfType<DictionaryAttr>(kModelsAttr);
  if (!presets || presets.empty())
    return module.emitError("module has no '")
           << kModelsAttr << "' dictionary of model presets";
  auto names = llvm::map_to_vector(presets, [](NamedAttribute a) {
    return a.getName().str();
  });
  std::string known = llvm::join(names, ", ");
  DictionaryAttr preset;
  Config cfg;
  if (model.empty()) {
    if (presets.size() != 1)
      return module.emitError("choose a model preset (model=...); known: ") << known;
    cfg.name = presets.begin()->getName().str();
    preset = llvm::dyn_cast<DictionaryAttr>(presets.begin()->getValue());
  } else {
    cfg.name = model.str();
    preset = presets.getAs<DictionaryAttr>(model);
    if (!preset)
      return module.emitError("unknown model preset '") << model << "'; known: " << known;
  }
  if (!preset)
    return module.emitError("preset '") << cfg.name << "' must be a dictionary";

  for (NamedAttribute entry : preset) {
    auto value = llvm::dyn_cast<IntegerAttr>(entry.getValue());
    if (!value)
      return module.emitError("preset '")
             << cfg.name << "' key '" << entry.getName() << "' must be an integer";
    cfg.values[entry.getName()] = value.getInt();
  }
  static const char *const kKnown[] = {"n_layer", "n_head", "n_embd",         "vocab_size",
                                       "block_size", "batch", "seq", "vocab_multiple",
                                       "fit_batch"};
  for (NamedAttribute entry : preset)
    if (!llvm::is_contained(kKnown, entry.getName().getValue()))
      return module.emitError("preset '")
             << cfg.name << "' has unknown key '" << entry.getName().getValue()
             << "' (known: " << llvm::join(std::begin(kKnown), std::end(kKnown), ", ") << ")";
  for (StringRef key : {"n_layer", "n_head", "n_embd", "vocab_size", "block_size"}) {
    auto it = cfg.values.find(key);
    if (it == cfg.values.end())
      return module.emitError("preset '") << cfg.name << "' lacks '" << key << "'";
    if (it->second < 1)
      return module.emitError("preset '")
             << cfg.name << "' key '" << key << "' must be positive";
  }
  if (auto it = cfg.values.find("vocab_multiple"); it != cfg.values.end() && it->second < 1)
    return module.emitError("preset '") << cfg.name << "' key 'vocab_multiple' must be positive";
  // The driver's business (gptc grows the batch to fit --gpu-memory), not
  // the model's: kept out of gpt.config, so checkpoints do not depend on it.
  cfg.values.erase("fit_batch");
  if (batch < 0 || seq < 0)
    return module.emitError("batch and seq must be positive");
  if (batch > 0)
    cfg.values["batch"] = batch;
  if (seq > 0)
    cfg.values["seq"] = seq;
  cfg.values.try_emplace("batch", 1);
  cfg.values.try_emplace("seq", cfg.values["block_size"]);
  if (cfg.values["batch"] < 1 || cfg.values["seq"] < 1)
    return module.emitError("batch and seq must be positive");
  if (cfg.values["seq"] > cfg.values["block_size"])
    return module.emitError("seq ") << cfg.values["seq"] << " exceeds block_size "
                                    << cfg.values["block_size"] << " of '"
                                    << cfg.name << "'";
  if (cfg.values["n_embd"] % cfg.values["n_head"] != 0)
    return module.emitError("n_embd ") << cfg.values["n_embd"]
                                       << " is not a multiple of n_head "
                                       << cfg.values["n_head"];
  // Token ids and kernel indices are 32-bit; a size past that overflowed
  // the padded vocabulary or the launch grid further on.
  for (const auto &entry : cfg.values)
    if (entry.second > std::numeric_limits<int32_t>::max())
      return module.emitError("'") << entry.getKey() << "' = " << entry.second << " of '"
                                   << cfg.name << "' exceeds 2^31-1";
  int64_t multiple = cfg.values.lookup("vocab_multiple");
  if (multiple == 0)
    multiple = 128;
  int64_t v = cfg.values["vocab_size"];
  cfg.values["vocab_multiple"] = multiple;
  cfg.values["padded_vocab_size"] = (v + multiple - 1) / multiple * multiple;
  // The largest activations, the (B, T, Vp) logits and the (B, T, 4C) MLP,
  // within 2^40 elements (no GPU holds more; past 2^63 the sizes wrap).
  __int128 rows = __int128(cfg.values["batch"]) * cfg.values["seq"];
  __int128 widest = std::max<int64_t>(cfg.values["padded_vocab_size"], 4 * cfg.values["n_embd"]);
  if (rows * widest > (__int128(1) << 40))
    return module.emitError("batch ")
           << cfg.values["batch"] << " x seq " << cfg.values["seq"] << " x "
           << int64_t(widest) << " activations exceed 2^40 elements: lower --batch or --seq";

  cfg.symbols = {{"B", cfg.values["batch"]},
                 {"T", cfg.values["seq"]},
                 {"C", cfg.values["n_embd"]},
                 {"H", cfg.values["n_head"]},
                 {"L", cfg.values["n_layer"]},
                 {"V", v},
                 {"Vp", cfg.values["padded_vocab_size"]},
                 {"maxT", cfg.values["block_size"]}};
  return cfg;
}

/// Parses a symbolic shape such as "(3*C, C)" or "()".
FailureOr<SmallVector<int64_t>> parseShape(StringRef text, const Config &cfg,
                                           function_ref<InFlightDiagnostic()> err) {
  StringRef body = text.trim();
  if (!body.consume_front("(") || !body.consume_back(")"))
    return err() << "shape '" << text << "' must be parenthesised, like \"(B, T)\"";
  SmallVector<int64_t> shape;
  if (body.trim().empty())
    return shape;
  SmallVector<StringRef> dims;
  body.split(dims, ',');
  for (StringRef dim : dims) {
    int64_t size = 1;
    SmallVector<StringRef> factors;
    dim.split(factors, '*');
    for (StringRef f : factors) {
      f = f.trim();
      int64_t n;
      if (!f.getAsInteger(10, n)) {
        size *= n;
        continue;
      }
      auto it = cfg.symbols.find(f);
      if (it == cfg.symbols.end())
        return err() << "unknown symbol '" << f << "' in shape '" << text
                     << "' (known: B, T, C, H, L, V, Vp, maxT)";
      size *= it->second;
    }
    shape.push_back(size);
  }
  return shape;
}

/// The static type of argument `i` of `fn` from its gpt.shape attribute.
FailureOr<Type> staticArgType(FunctionOpInterface fn, unsigned i,
                              const Config &cfg) {
  auto type = llvm::dyn_cast<RankedTensorType>(fn.getArgumentTypes()[i]);
  if (!type)
    return fn.emitError("argument ") << i << " of @" << fn.getName()
                                     << " must be a ranked tensor, got "
                                     << fn.getArgumentTypes()[i];
  auto shapeAttr = fn.getArgAttrOfType<StringAttr>(i, kShapeAttrName);
  if (!shapeAttr) {
    if (type.hasStaticShape())
      return Type(type);
    return fn.emitError("argument ") << i << " of @" << fn.getName()
                                     << " needs a '" << kShapeAttrName
                                     << "' to become static";
  }
  auto shape = parseShape(shapeAttr.getValue(), cfg,
                          [&] { return fn.emitError("argument ") << i << ": "; });
  if (failed(shape))
    return failure();
  if (static_cast<int64_t>(shape->size()) != type.getRank() ||
      failed(verifyCompatibleShape(type.getShape(), *shape)))
    return fn.emitError("argument ")
           << i << " of @" << fn.getName() << " has type " << type
           << " but gpt.shape \"" << shapeAttr.getValue() << "\"";
  return Type(RankedTensorType::get(*shape, type.getElementType()));
}

/// Unrolls one gpt.repeat into `count` inlined copies of its block.
LogicalResult unroll(RepeatOp repeat, func::FuncOp fn, SymbolTable &symbols,
                     const Config &cfg) {
  auto block = symbols.lookup<func::FuncOp>(repeat.getCallee());
  if (!block || !block.getBody().hasOneBlock())
    return repeat.emitOpError("callee must be a func.func with one block");
  std::optional<int64_t> count = getConfigInt(repeat.getCount());
  if (!count)
    return repeat.emitOpError("count is still a config reference");

  SmallVector<Type> paramTypes;
  for (unsigned j = 1; j < block.getNumArguments(); ++j) {
    FailureOr<Type> t = staticArgType(block, j, cfg);
    if (failed(t))
      return failure();
    paramTypes.push_back(*t);
  }

  OpBuilder builder(repeat);
  Value activation = repeat.getInput();
  for (int64_t i = 0; i < *count; ++i) {
    IRMapping map;
    map.map(block.getArgument(0), activation);
    for (unsigned j = 1; j < block.getNumArguments(); ++j) {
      SmallVector<NamedAttribute> attrs(block.getArgAttrDict(j).getValue());
      std::string name = (repeat.getPrefix() + "." + Twine(i) + "." +
                          block.getArgAttrOfType<StringAttr>(j, kParamAttrName)
                              .getValue())
                             .str();
      for (NamedAttribute &a : attrs)
        if (a.getName() == kParamAttrName)
          a.setValue(builder.getStringAttr(name));
      unsigned index = fn.getNumArguments();
      if (failed(fn.insertArgument(index, paramTypes[j - 1],
                                   builder.getDictionaryAttr(attrs),
                                   block.getArgument(j).getLoc())))
        return failure();
      map.map(block.getArgument(j), fn.getArgument(index));
    }
    for (Operation &op : block.getBody().front().without_terminator())
      builder.clone(op, map);
    auto ret = llvm::cast<func::ReturnOp>(block.getBody().front().getTerminator());
    activation = map.lookup(ret.getOperand(0));
  }
  repeat.replaceAllUsesWith(activation);
  repeat.erase();
  return success();
}

/// Recomputes result types in program order now that arguments are static.
LogicalResult reinferTypes(func::FuncOp fn) {
  WalkResult walk = fn.walk([&](Operation *op) -> WalkResult {
    if (auto infer = llvm::dyn_cast<InferTypeOpInterface>(op)) {
      SmallVector<Type> types;
      if (failed(infer.inferReturnTypes(op->getContext(), op->getLoc(),
                                        op->getOperands(), op->getRawDictionaryAttrs(),
                                        op->getPropertiesStorage(),
                                        op->getRegions(), types)))
        return WalkResult::interrupt();
      for (auto [result, type] : llvm::zip(op->getResults(), types))
        result.setType(type);
    }
    for (Type t : op->getResultTypes())
      if (auto shaped = llvm::dyn_cast<ShapedType>(t); shaped && !shaped.hasStaticShape()) {
        op->emitOpError("result type ") << t << " is still dynamic after instantiation";
        return WalkResult::interrupt();
      }
    return WalkResult::advance();
  });
  if (walk.wasInterrupted())
    return failure();
  auto ret = llvm::cast<func::ReturnOp>(fn.getBody().front().getTerminator());
  fn.setFunctionType(FunctionType::get(fn.getContext(), fn.front().getArgumentTypes(),
                                       ret.getOperandTypes()));
  return success();
}

struct InstantiateModelPass
    : public gpt::impl::InstantiateModelPassBase<InstantiateModelPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    FailureOr<Config> cfg = resolveConfig(module, model, batch, seq);
    if (failed(cfg))
      return signalPassFailure();

    // #gpt.cfg<"key"> -> integer. Unknown keys are reported after the walk.
    std::optional<std::string> unknown; // "" is a key too, and unknown
    AttrTypeReplacer replacer;
    Builder b(module.getContext());
    replacer.addReplacement([&](ConfigRefAttr ref) -> std::optional<Attribute> {
      auto it = cfg->values.find(ref.getName());
      if (it == cfg->values.end()) {
        unknown = ref.getName().str();
        return std::nullopt;
      }
      return b.getI64IntegerAttr(it->second);
    });
    replacer.recursivelyReplaceElementsIn(module, /*replaceAttrs=*/true,
                                          /*replaceLocs=*/false,
                                          /*replaceTypes=*/false);
    if (unknown) {
      module.emitError("unknown configuration key '") << *unknown << "' in #gpt.cfg";
      return signalPassFailure();
    }

    SymbolTable symbols(module);
    llvm::SetVector<Operation *> blocks;
    for (auto fn : llvm::to_vector(module.getOps<func::FuncOp>())) {
      if (fn.isPrivate() || fn.isExternal())
        continue;
      for (unsigned i = 0; i < fn.getNumArguments(); ++i) {
        FailureOr<Type> t = staticArgType(fn, i, *cfg);
        if (failed(t))
          return signalPassFailure();
        fn.getArgument(i).setType(*t);
      }
      for (RepeatOp repeat : llvm::to_vector(fn.getOps<RepeatOp>())) {
        if (Operation *callee = symbols.lookup(repeat.getCallee()))
          blocks.insert(callee);
        if (failed(unroll(repeat, fn, symbols, *cfg)))
          return signalPassFailure();
      }
      if (failed(reinferTypes(fn)))
        return signalPassFailure();

      // Parameters and inputs are bound by name (optimizer state,
      // checkpoints, the runtime's tensors): two of one name would alias.
      int64_t params = 0;
      llvm::StringMap<unsigned> names;
      for (unsigned i = 0; i < fn.getNumArguments(); ++i) {
        for (StringRef kind : {StringRef(kParamAttrName), StringRef(kInputAttrName)})
          if (auto name = fn.getArgAttrOfType<StringAttr>(i, kind)) {
            auto [it, inserted] = names.try_emplace(name.getValue(), i);
            if (!inserted) {
              fn.emitError("arguments ") << it->second << " and " << i << " of @"
                                         << fn.getName() << " are both named '"
                                         << name.getValue() << "'";
              return signalPassFailure();
            }
          }
        if (fn.getArgAttr(i, kParamAttrName))
          params += llvm::cast<ShapedType>(fn.getArgument(i).getType()).getNumElements();
      }
      fn->setAttr(kNumParamsAttr, b.getI64IntegerAttr(params));
    }
    for (Operation *block : blocks)
      if (SymbolTable::symbolKnownUseEmpty(block, module))
        block->erase();

    SmallVector<NamedAttribute> resolved;
    resolved.push_back(b.getNamedAttr("name", b.getStringAttr(cfg->name)));
    for (auto &entry : cfg->values)
      resolved.push_back(b.getNamedAttr(entry.getKey(), b.getI64IntegerAttr(entry.getValue())));
    module->setAttr(kConfigAttr, b.getDictionaryAttr(resolved));
    module->removeAttr(kModelsAttr);
  }
};

} // namespace

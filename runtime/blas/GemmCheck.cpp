//===- GemmCheck.cpp - operand shapes and extents of a schema::Gemm -------===//

#include "runtime/blas/GemmCheck.h"

#include "runtime/executable/Executable.h"

#include <string>

namespace gptc::blas {

StoredMatrix storedA(const schema::Gemm &g) {
  return g.transa() ? StoredMatrix{g.k(), g.m(), g.lda(), g.stride_a()}
                    : StoredMatrix{g.m(), g.k(), g.lda(), g.stride_a()};
}

StoredMatrix storedB(const schema::Gemm &g) {
  return g.transb() ? StoredMatrix{g.n(), g.k(), g.ldb(), g.stride_b()}
                    : StoredMatrix{g.k(), g.n(), g.ldb(), g.stride_b()};
}

StoredMatrix storedC(const schema::Gemm &g) {
  return StoredMatrix{g.m(), g.n(), g.ldc(), g.stride_c()};
}

uint64_t spanElements(const StoredMatrix &s, int64_t batch) {
  // checkGemm bounds the span by 2^48, so this cannot overflow.
  return uint64_t(batch - 1) * uint64_t(s.stride) + uint64_t(s.cols - 1) * uint64_t(s.ld) +
         uint64_t(s.rows);
}

bool isFp8(schema::DType t) { return t == schema::DType::F8E4M3 || t == schema::DType::F8E5M2; }

bool isFp8Gemm(const schema::Gemm &g) { return isFp8(g.a_type()) || isFp8(g.b_type()); }

bool isSupportedEpilogue(schema::Epilogue e) {
  return e >= schema::Epilogue::MIN && e <= schema::Epilogue::MAX;
}

bool epilogueReadsBias(schema::Epilogue e) {
  return e == schema::Epilogue::Bias || e == schema::Epilogue::BiasGelu ||
         e == schema::Epilogue::BiasGeluAux;
}

bool epilogueWritesBias(schema::Epilogue e) {
  return e == schema::Epilogue::BGradA || e == schema::Epilogue::BGradB ||
         e == schema::Epilogue::DGeluBGrad;
}

int64_t epilogueBiasLength(const schema::Gemm &g) {
  if (g.epilogue() == schema::Epilogue::BGradB)
    return g.n();
  return epilogueReadsBias(g.epilogue()) || epilogueWritesBias(g.epilogue()) ? g.m() : 0;
}

bool epilogueHasAux(schema::Epilogue e) {
  return e == schema::Epilogue::GeluAux || e == schema::Epilogue::BiasGeluAux ||
         epilogueAppliesGeluGrad(e);
}

bool epilogueAppliesGeluGrad(schema::Epilogue e) {
  return e == schema::Epilogue::DGelu || e == schema::Epilogue::DGeluBGrad;
}

bool epilogueAppliesGelu(schema::Epilogue e) {
  return e == schema::Epilogue::Gelu || e == schema::Epilogue::GeluAux ||
         e == schema::Epilogue::BiasGelu || e == schema::Epilogue::BiasGeluAux;
}

namespace {

constexpr int64_t kMaxDim = int64_t(1) << 31;
// No tensor is this large; bounding spans keeps all later arithmetic exact.
constexpr double kMaxSpan = double(int64_t(1) << 48);

/// spanElements in double: it cannot overflow, and its rounding is far too
/// small to matter against kMaxSpan.
double wideSpan(const StoredMatrix &s, int64_t batch) {
  return double(batch - 1) * double(s.stride) + double(s.cols - 1) * double(s.ld) + double(s.rows);
}

bool isFloatType(schema::DType t) { return t != schema::DType::I32; }

std::string dims(const schema::Gemm &g) {
  return "m=" + std::to_string(g.m()) + " n=" + std::to_string(g.n()) +
         " k=" + std::to_string(g.k()) + " batch=" + std::to_string(g.batch());
}

} // namespace

Status checkGemm(const schema::Gemm &g, uint32_t index) {
  std::string where = "GEMM " + std::to_string(index) + " (" + dims(g) + "): ";
  for (int64_t d : {g.m(), g.n(), g.k(), g.batch()})
    if (d < 1 || d >= kMaxDim)
      return Status::error(where + "sizes must be in 1..2^31-1");
  struct Named {
    const char *name;
    StoredMatrix s;
  };
  for (const Named &op : {Named{"A", storedA(g)}, Named{"B", storedB(g)}, Named{"C", storedC(g)}}) {
    if (op.s.ld < op.s.rows || op.s.ld >= kMaxDim)
      return Status::error(where + "leading dimension of " + op.name + " is " +
                           std::to_string(op.s.ld) + ", its stored columns have " +
                           std::to_string(op.s.rows) + " rows");
    if (op.s.stride < 0 || wideSpan(op.s, g.batch()) >= kMaxSpan)
      return Status::error(where + "batch stride of " + op.name + " is " +
                           std::to_string(op.s.stride));
  }
  // Overlapping batches of D would race on the GPU.
  if (g.batch() > 1 && g.stride_c() < (g.n() - 1) * g.ldc() + g.m())
    return Status::error(where + "batches of D overlap (stride_c " + std::to_string(g.stride_c()) +
                         " < (n-1)*ldc + m)");
  for (schema::DType t : {g.a_type(), g.b_type(), g.c_type()})
    if (!isFloatType(t))
      return Status::error(where + std::string("operand type ") + schema::EnumNameDType(t) +
                           " is not a floating-point type");
  if (!isSupportedEpilogue(g.epilogue()))
    return Status::error(where + "epilogue " + std::to_string(int(g.epilogue())) +
                         " is not one this runtime knows");
  bool plain = g.epilogue() == schema::Epilogue::None || g.epilogue() == schema::Epilogue::Bias;
  if (!plain && (g.batch() != 1 || g.beta() != 0))
    return Status::error(where + "epilogue " + schema::EnumNameEpilogue(g.epilogue()) +
                         " needs batch 1 and beta 0");
  if (isFp8(g.c_type()))
    return Status::error(where + "C is F32, BF16 or F16 (an FP8 D is d_type), not " +
                         schema::EnumNameDType(g.c_type()));
  const flatbuffers::Optional<schema::DType> dType = g.d_type();
  if (dType) {
    auto refuse = [&](const std::string &why) {
      return Status::error(where + "FP8 D (" + schema::EnumNameDType(*dType) + "): " + why);
    };
    if (!isFp8(*dType))
      return refuse("d_type is for FP8 codes only (F8E4M3, F8E5M2)");
    if (!isFp8Gemm(g))
      return refuse("needs FP8 operands");
    if (g.c_type() != schema::DType::BF16 && g.c_type() != schema::DType::F16)
      return refuse(std::string("C, the bias and aux must be BF16 or F16, got ") +
                    schema::EnumNameDType(g.c_type()));
    if (g.batch() != 1 || g.beta() != 0)
      return refuse("needs batch 1 and beta 0");
    if (g.ldc() % 16)
      return refuse("ldc must be a multiple of 16");
  }
  if (isFp8Gemm(g)) {
    auto refuse = [&](const std::string &why) {
      return Status::error(where + "FP8 GEMM (" + schema::EnumNameDType(g.a_type()) + " x " +
                           schema::EnumNameDType(g.b_type()) + "): " + why);
    };
    if (!isFp8(g.a_type()) || !isFp8(g.b_type()))
      return refuse("both operands must be FP8");
    if (g.a_type() == schema::DType::F8E5M2 && g.b_type() == schema::DType::F8E5M2)
      return refuse("at most one operand may be F8E5M2");
    if (!g.transa() || g.transb())
      return refuse("A must be transposed and B not (cuBLASLt's only FP8 layout on sm_90)");
    if (g.m() % 16 || g.k() % 16 || g.lda() % 16 || g.ldb() % 16 ||
        (g.ldc() * elementSize(g.c_type())) % 16)
      return refuse("m, k, lda and ldb must be multiples of 16, ldc of 16 bytes");
    if (g.compute() != schema::ComputeType::F32)
      return refuse(std::string("compute must be F32, got ") +
                    schema::EnumNameComputeType(g.compute()));
    bool geluAux = g.epilogue() == schema::Epilogue::GeluAux ||
                   g.epilogue() == schema::Epilogue::BiasGeluAux;
    if (!plain && !(geluAux && dType))
      return refuse(std::string("epilogue ") + schema::EnumNameEpilogue(g.epilogue()) +
                    " (None and Bias, and GeluAux and BiasGeluAux with an FP8 D)");
    // The bias has D's type, and cuBLASLt's FP8 kernels take no F32 bias
    // (the heuristic answered NOT_SUPPORTED on the H200).
    if (g.epilogue() == schema::Epilogue::Bias && g.c_type() == schema::DType::F32)
      return refuse("a Bias epilogue needs a BF16 or F16 D (no FP8 kernel takes an F32 bias)");
  } else if (g.fast_accum()) {
    return Status::error(where + "fast_accum is for FP8 operands");
  }
  if (epilogueHasAux(g.epilogue()) && g.ldc() % 8 != 0)
    return Status::error(where + "epilogue " + schema::EnumNameEpilogue(g.epilogue()) +
                         " needs ldc divisible by 8 (the aux matrix's leading dimension), got " +
                         std::to_string(g.ldc()));
  return Status::ok();
}

Status checkRunGemm(const schema::Executable &exe, const schema::RunGemm &cmd) {
  const schema::Gemm &g = *exe.gemms()->Get(cmd.gemm());
  if (Status s = checkGemm(g, cmd.gemm()); !s)
    return s;
  std::string where = "GEMM " + std::to_string(cmd.gemm()) + ": ";
  auto operand = [&](const char *name, uint64_t tensor, schema::DType type,
                     uint64_t elements) -> Status {
    const schema::Tensor &t = *exe.tensors()->Get(tensor);
    std::string tname = t.name() ? t.name()->str() : std::to_string(tensor);
    if (t.dtype() != type)
      return Status::error(where + name + " is tensor '" + tname + "' of type " +
                           schema::EnumNameDType(t.dtype()) + ", the GEMM reads " +
                           schema::EnumNameDType(type));
    uint64_t need = elements * elementSize(type);
    if (need > t.size_bytes())
      return Status::error(where + name + " spans " + std::to_string(need) + " bytes but tensor '" +
                           tname + "' has " + std::to_string(t.size_bytes()));
    return Status::ok();
  };
  if (Status s = operand("A", cmd.a(), g.a_type(), spanElements(storedA(g), g.batch())); !s)
    return s;
  if (Status s = operand("B", cmd.b(), g.b_type(), spanElements(storedB(g), g.batch())); !s)
    return s;
  const flatbuffers::Optional<schema::DType> dType = g.d_type();
  if (Status s = operand(dType ? "D" : "C", cmd.c(), dType ? *dType : g.c_type(),
                         spanElements(storedC(g), g.batch()));
      !s)
    return s;
  int64_t biasLength = epilogueBiasLength(g);
  if ((biasLength > 0) != (cmd.bias() >= 0))
    return Status::error(where + "epilogue " + schema::EnumNameEpilogue(g.epilogue()) +
                         (biasLength > 0 ? " needs a bias tensor" : " takes no bias tensor"));
  if (biasLength > 0)
    if (Status s = operand("bias", uint64_t(cmd.bias()), g.c_type(), uint64_t(biasLength)); !s)
      return s;
  bool wantsAux = epilogueHasAux(g.epilogue());
  if (wantsAux != (cmd.aux() >= 0))
    return Status::error(where + "epilogue " + schema::EnumNameEpilogue(g.epilogue()) +
                         (wantsAux ? " needs an aux tensor" : " takes no aux tensor"));
  if (wantsAux)
    if (Status s = operand("aux", uint64_t(cmd.aux()), g.c_type(),
                           spanElements(storedC(g), g.batch()));
        !s)
      return s;
  bool fp8 = isFp8Gemm(g);
  for (auto [name, scale] : {std::pair{"a_scale", cmd.a_scale()}, std::pair{"b_scale", cmd.b_scale()}}) {
    if (fp8 != (scale >= 0))
      return Status::error(where + (fp8 ? std::string("FP8 operands need ") + name + ", a scale tensor"
                                        : std::string(name) + " is for FP8 operands only"));
    if (fp8)
      if (Status s = operand(name, uint64_t(scale), schema::DType::F32, 1); !s)
        return s;
  }
  for (auto [name, f32] : {std::pair{"d_scale", cmd.d_scale()}, std::pair{"amax_d", cmd.amax_d()}}) {
    if (dType.has_value() != (f32 >= 0))
      return Status::error(where + (dType ? std::string("an FP8 D needs ") + name + ", an F32 tensor"
                                          : std::string(name) + " is for an FP8 D only"));
    if (dType)
      if (Status s = operand(name, uint64_t(f32), schema::DType::F32, 1); !s)
        return s;
  }
  return Status::ok();
}

} // namespace gptc::blas

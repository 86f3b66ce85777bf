//===- ExecutableBuilder.h - hand-built step.fb files for runtime tests ---===//
//
// Describes an executable with plain structs, then writes it with the
// FlatBuffers builder in one go (FlatBuffers wants children before their
// parents, which plain structs make easy). Tensor sizes follow from dtype
// and shape.
//
//===----------------------------------------------------------------------===//

#ifndef GPTC_TEST_UNIT_RUNTIME_EXECUTABLEBUILDER_H
#define GPTC_TEST_UNIT_RUNTIME_EXECUTABLEBUILDER_H

#include "runtime/executable/Executable.h"

#include <fstream>
#include <iterator>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace gptc::testing {

namespace s = gptc::schema;

/// A kernel argument: a tensor, an int64 or a double.
struct ArgSpec {
  bool tensor = false;
  uint32_t index = 0;
  int64_t i64 = 0;
  double f64 = 0;
  bool isFloat = false;
};
inline ArgSpec tensorArg(uint32_t index) { return {true, index, 0, 0, false}; }
inline ArgSpec intArg(int64_t v) { return {false, 0, v, 0, false}; }
inline ArgSpec floatArg(double v) { return {false, 0, 0, v, true}; }

/// The fields of schema::Gemm.
struct GemmSpec {
  int64_t m = 1, n = 1, k = 1, batch = 1;
  bool transa = false, transb = false;
  int64_t lda = 1, ldb = 1, ldc = 1;
  int64_t strideA = 0, strideB = 0, strideC = 0;
  s::DType aType = s::DType::F32, bType = s::DType::F32, cType = s::DType::F32;
  s::ComputeType compute = s::ComputeType::F32;
  s::Epilogue epilogue = s::Epilogue::None;
  double alpha = 1, beta = 0;
  bool fastAccum = false; // FP8 only
  std::optional<s::DType> dType; // FP8 D's codes; none: D has cType
};

struct CommandSpec {
  uint32_t stream = 0;
  s::Op op = s::Op::NONE;
  // LaunchKernel
  uint32_t kernel = 0;
  std::vector<uint32_t> grid{1, 1, 1}, block{1, 1, 1};
  uint32_t sharedBytes = 0;
  std::vector<ArgSpec> args;
  // RunGemm: gemm, a, b, c, bias, aux; Memset: a, byte; Copy: a -> b; events: event
  uint32_t gemm = 0, a = 0, b = 0, c = 0;
  int64_t bias = -1, aux = -1;
  int64_t aScale = -1, bScale = -1; // FP8 RunGemm
  int64_t dScale = -1, amaxD = -1;   // FP8 D
  uint8_t byte = 0;
  uint32_t event = 0;
  std::vector<uint32_t> tensors; // AllReduce
};

struct ProgramSpec {
  std::string name;
  std::vector<uint32_t> inputs, outputs;
  std::vector<CommandSpec> commands;
  std::string liveAtPeak; // empty: absent

  ProgramSpec &launch(uint32_t kernel, std::vector<ArgSpec> args, uint32_t gridX = 1,
                      uint32_t blockX = 1, uint32_t stream = 0) {
    CommandSpec c;
    c.op = s::Op::LaunchKernel;
    c.kernel = kernel;
    c.args = std::move(args);
    c.grid = {gridX, 1, 1};
    c.block = {blockX, 1, 1};
    c.stream = stream;
    commands.push_back(std::move(c));
    return *this;
  }
  ProgramSpec &gemm(uint32_t gemm, uint32_t a, uint32_t b, uint32_t c, int64_t bias = -1,
                    uint32_t stream = 0) {
    CommandSpec cmd;
    cmd.op = s::Op::RunGemm;
    cmd.gemm = gemm;
    cmd.a = a;
    cmd.b = b;
    cmd.c = c;
    cmd.bias = bias;
    cmd.stream = stream;
    commands.push_back(std::move(cmd));
    return *this;
  }
  /// The last command, a RunGemm, takes FP8 scale tensors.
  ProgramSpec &scales(uint32_t aScale, uint32_t bScale) {
    commands.back().aScale = aScale;
    commands.back().bScale = bScale;
    return *this;
  }
  ProgramSpec &memset(uint32_t tensor, uint8_t byte, uint32_t stream = 0) {
    CommandSpec c;
    c.op = s::Op::Memset;
    c.a = tensor;
    c.byte = byte;
    c.stream = stream;
    commands.push_back(std::move(c));
    return *this;
  }
  ProgramSpec &copy(uint32_t src, uint32_t dst, uint32_t stream = 0) {
    CommandSpec c;
    c.op = s::Op::Copy;
    c.a = src;
    c.b = dst;
    c.stream = stream;
    commands.push_back(std::move(c));
    return *this;
  }
  ProgramSpec &record(uint32_t event, uint32_t stream) {
    CommandSpec c;
    c.op = s::Op::RecordEvent;
    c.event = event;
    c.stream = stream;
    commands.push_back(std::move(c));
    return *this;
  }
  ProgramSpec &wait(uint32_t event, uint32_t stream) {
    CommandSpec c;
    c.op = s::Op::WaitEvent;
    c.event = event;
    c.stream = stream;
    commands.push_back(std::move(c));
    return *this;
  }
  ProgramSpec &allReduce(std::vector<uint32_t> tensors) {
    CommandSpec c;
    c.op = s::Op::AllReduce;
    c.tensors = std::move(tensors);
    commands.push_back(std::move(c));
    return *this;
  }
};

struct ExecutableSpec {
  s::TargetKind target = s::TargetKind::Host;
  std::string arch = "x86_64";
  std::string modelName = "test";
  int64_t numParameters = 0;
  std::vector<std::pair<std::string, int64_t>> config;
  std::vector<std::pair<std::string, double>> optimizer; // Model.optimizer
  struct Pool {
    std::string name;
    uint64_t bytes;
    uint32_t alignment;
  };
  std::vector<Pool> pools;
  struct Tensor {
    std::string name;
    s::TensorRole role;
    s::DType dtype;
    std::vector<int64_t> shape;
    uint32_t pool;
    uint64_t offset;
  };
  std::vector<Tensor> tensors;
  struct Kernel {
    std::string name;
    uint32_t numArgs;
    std::vector<uint8_t> cubin;
    std::string ptx;
    std::string hostSymbol;
  };
  std::vector<Kernel> kernels;
  std::vector<GemmSpec> gemms;
  std::vector<ProgramSpec> programs;
  uint32_t numStreams = 1, numEvents = 0;
  std::vector<uint8_t> hostObject;

  uint32_t addPool(std::string name, uint64_t bytes, uint32_t alignment = 256) {
    pools.push_back({std::move(name), bytes, alignment});
    return uint32_t(pools.size() - 1);
  }
  uint32_t addTensor(std::string name, s::TensorRole role, s::DType dtype,
                     std::vector<int64_t> shape, uint32_t pool, uint64_t offset) {
    tensors.push_back({std::move(name), role, dtype, std::move(shape), pool, offset});
    return uint32_t(tensors.size() - 1);
  }
  uint32_t addKernel(std::string name, uint32_t numArgs) {
    kernels.push_back({name, numArgs, {}, "", name});
    return uint32_t(kernels.size() - 1);
  }
  uint32_t addGemm(GemmSpec g) {
    gemms.push_back(g);
    return uint32_t(gemms.size() - 1);
  }
  ProgramSpec &addProgram(std::string name, std::vector<uint32_t> inputs = {},
                          std::vector<uint32_t> outputs = {}) {
    programs.push_back({std::move(name), std::move(inputs), std::move(outputs), {}});
    return programs.back();
  }
  static uint64_t bytesOf(const Tensor &t) {
    uint64_t n = 1;
    for (int64_t d : t.shape)
      n *= uint64_t(d);
    return n * elementSize(t.dtype);
  }

  std::vector<uint8_t> build() const {
    flatbuffers::FlatBufferBuilder b;
    std::vector<flatbuffers::Offset<s::Pool>> poolOffs;
    for (const Pool &p : pools)
      poolOffs.push_back(s::CreatePool(b, b.CreateString(p.name), p.bytes, p.alignment));
    std::vector<flatbuffers::Offset<s::Tensor>> tensorOffs;
    for (const Tensor &t : tensors)
      tensorOffs.push_back(s::CreateTensor(b, b.CreateString(t.name), t.role, t.dtype,
                                           b.CreateVector(t.shape), t.pool, t.offset, bytesOf(t), 0,
                                           0));
    std::vector<flatbuffers::Offset<s::Kernel>> kernelOffs;
    for (const Kernel &k : kernels)
      kernelOffs.push_back(s::CreateKernel(
          b, b.CreateString(k.name), k.cubin.empty() ? 0 : b.CreateVector(k.cubin),
          k.ptx.empty() ? 0 : b.CreateString(k.ptx), b.CreateString(k.hostSymbol), k.numArgs));
    std::vector<flatbuffers::Offset<s::Gemm>> gemmOffs;
    for (const GemmSpec &g : gemms)
      gemmOffs.push_back(s::CreateGemm(b, g.m, g.n, g.k, g.batch, g.transa, g.transb, g.lda, g.ldb,
                                       g.ldc, g.strideA, g.strideB, g.strideC, g.aType, g.bType,
                                       g.cType, g.compute, g.epilogue, g.alpha, g.beta,
                                       g.fastAccum,
                                       g.dType ? flatbuffers::Optional<s::DType>(*g.dType)
                                               : flatbuffers::Optional<s::DType>()));
    std::vector<flatbuffers::Offset<s::Program>> programOffs;
    for (const ProgramSpec &p : programs) {
      std::vector<flatbuffers::Offset<s::Command>> cmds;
      for (const CommandSpec &c : p.commands) {
        flatbuffers::Offset<void> op;
        switch (c.op) {
        case s::Op::LaunchKernel: {
          std::vector<s::Arg> types;
          std::vector<flatbuffers::Offset<void>> args;
          for (const ArgSpec &a : c.args) {
            types.push_back(a.tensor ? s::Arg::TensorArg : s::Arg::ScalarArg);
            args.push_back(a.tensor ? s::CreateTensorArg(b, a.index).Union()
                                    : s::CreateScalarArg(b, a.i64, a.f64, a.isFloat).Union());
          }
          op = s::CreateLaunchKernel(b, c.kernel, b.CreateVector(c.grid), b.CreateVector(c.block),
                                     c.sharedBytes, b.CreateVector(types), b.CreateVector(args))
                   .Union();
          break;
        }
        case s::Op::RunGemm:
          op = s::CreateRunGemm(b, c.gemm, c.a, c.b, c.c, c.bias, c.aux, c.aScale, c.bScale,
                                c.dScale, c.amaxD)
                   .Union();
          break;
        case s::Op::Memset:
          op = s::CreateMemset(b, c.a, c.byte).Union();
          break;
        case s::Op::Copy:
          op = s::CreateCopy(b, c.a, c.b).Union();
          break;
        case s::Op::RecordEvent:
          op = s::CreateRecordEvent(b, c.event).Union();
          break;
        case s::Op::WaitEvent:
          op = s::CreateWaitEvent(b, c.event).Union();
          break;
        case s::Op::AllReduce:
          op = s::CreateAllReduce(b, b.CreateVector(c.tensors)).Union();
          break;
        case s::Op::NONE:
          break;
        }
        cmds.push_back(s::CreateCommand(b, c.stream, c.op, op));
      }
      programOffs.push_back(s::CreateProgram(
          b, b.CreateString(p.name), b.CreateVector(p.inputs), b.CreateVector(p.outputs),
          b.CreateVector(cmds), p.liveAtPeak.empty() ? 0 : b.CreateString(p.liveAtPeak)));
    }
    std::vector<flatbuffers::Offset<s::KeyValue>> kvs;
    for (const auto &[k, v] : config)
      kvs.push_back(s::CreateKeyValue(b, b.CreateString(k), v));
    std::vector<flatbuffers::Offset<s::Hyperparameter>> hps;
    for (const auto &[k, v] : optimizer)
      hps.push_back(s::CreateHyperparameter(b, b.CreateString(k), v));
    auto model = s::CreateModel(b, b.CreateString(modelName), b.CreateVector(kvs), numParameters,
                                b.CreateVector(hps));
    auto tgt = s::CreateTarget(b, target, b.CreateString(arch));
    auto exe = s::CreateExecutable(
        b, static_cast<uint32_t>(s::FormatVersion::Current), tgt, model, b.CreateVector(poolOffs),
        b.CreateVector(tensorOffs), b.CreateVector(kernelOffs), b.CreateVector(gemmOffs),
        b.CreateVector(programOffs), numStreams, numEvents,
        hostObject.empty() ? 0 : b.CreateVector(hostObject), b.CreateString("test"), 0,
        kUnsealedChecksum);
    s::FinishExecutableBuffer(b, exe);
    std::vector<uint8_t> bytes(b.GetBufferPointer(), b.GetBufferPointer() + b.GetSize());
    // Sealed like gptc's; a builder that breaks the structure on purpose
    // gets the verifier's refusal at load instead.
    (void)sealExecutable(bytes);
    return bytes;
  }
};

/// The bytes of a file (e.g. the test kernels' shared object), empty if unreadable.
inline std::vector<uint8_t> readFileBytes(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

} // namespace gptc::testing

#endif // GPTC_TEST_UNIT_RUNTIME_EXECUTABLEBUILDER_H

//===- ExecutableTest.cpp - step.fb loading and checking -----------------===//
//
// Builds small executables with the FlatBuffers builder, then checks that
// the loader accepts the good one and names the fault in each bad one.
//
//===----------------------------------------------------------------------===//

#include "runtime/executable/Executable.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <functional>

using namespace gptc;
namespace fb = flatbuffers;
namespace s = gptc::schema;

namespace {

/// Knobs for building a one-kernel, one-GEMM executable.
struct Spec {
  uint32_t version = static_cast<uint32_t>(s::FormatVersion::Current);
  uint64_t poolSize = 1024;
  uint64_t tensorOffset = 0;
  uint64_t tensorBytes = 64; // 16 x f32
  uint32_t kernelIndex = 0;
  uint32_t gemmIndex = 0;
  uint32_t stream = 0;
  uint32_t blockX = 128;
  uint32_t argTensor = 0;
  uint32_t numArgs = 1;
  std::vector<int64_t> shape = {16};
  /// The kernel's recorded argument extents (Kernel.arg_bytes); empty: none.
  std::vector<uint64_t> argBytes;
  bool scalarArg = false; // pass argument 0 as a ScalarArg (a number)
  int reduceOp = -1;   // >= 0: an AllReduce of tensor 0 by this operation too
  bool sealed = false; // with a checksum, as gptc writes them
};

std::vector<uint8_t> build(const Spec &spec) {
  fb::FlatBufferBuilder b;
  auto pool = s::CreatePool(b, b.CreateString("activations"), spec.poolSize);
  const std::vector<int64_t> &shape = spec.shape;
  auto tensor = s::CreateTensor(b, b.CreateString("x"), s::TensorRole::Activation,
                                s::DType::F32, b.CreateVector(shape), 0, spec.tensorOffset,
                                spec.tensorBytes, 0, 1);
  auto kernel = s::CreateKernel(b, b.CreateString("gelu_forward"), 0,
                                b.CreateString(".version 8.0"), 0, spec.numArgs, false,
                                spec.argBytes.empty() ? 0 : b.CreateVector(spec.argBytes));
  auto gemm = s::CreateGemm(b, 4, 4, 4);
  std::vector<uint32_t> grid = {1, 1, 1}, block = {spec.blockX, 1, 1};
  std::vector<fb::Offset<void>> args = {
      spec.scalarArg ? s::CreateScalarArg(b, 4096).Union()
                     : s::CreateTensorArg(b, spec.argTensor).Union()};
  std::vector<s::Arg> argTypes = {spec.scalarArg ? s::Arg::ScalarArg : s::Arg::TensorArg};
  auto launch = s::CreateLaunchKernel(b, spec.kernelIndex, b.CreateVector(grid),
                                      b.CreateVector(block), 0, b.CreateVector(argTypes),
                                      b.CreateVector(args));
  auto runGemm = s::CreateRunGemm(b, spec.gemmIndex, 0, 0, 0);
  std::vector<fb::Offset<s::Command>> cmds = {
      s::CreateCommand(b, spec.stream, s::Op::LaunchKernel, launch.Union()),
      s::CreateCommand(b, 0, s::Op::RunGemm, runGemm.Union())};
  if (spec.reduceOp >= 0) {
    std::vector<uint32_t> reduced = {0};
    auto reduce = s::CreateAllReduce(b, b.CreateVector(reduced), s::ReduceOp(spec.reduceOp));
    cmds.push_back(s::CreateCommand(b, 0, s::Op::AllReduce, reduce.Union()));
  }
  std::vector<uint32_t> io = {0};
  auto program = s::CreateProgram(b, b.CreateString("train_step"), b.CreateVector(io),
                                  b.CreateVector(io), b.CreateVector(cmds));
  auto model = s::CreateModel(b, b.CreateString("tiny"), 0, 7872);
  auto target = s::CreateTarget(b, s::TargetKind::CUDA, b.CreateString("sm_90"));
  std::vector<fb::Offset<s::Pool>> pools = {pool};
  std::vector<fb::Offset<s::Tensor>> tensors = {tensor};
  std::vector<fb::Offset<s::Kernel>> kernels = {kernel};
  std::vector<fb::Offset<s::Gemm>> gemms = {gemm};
  std::vector<fb::Offset<s::Program>> programs = {program};
  auto exe = s::CreateExecutable(b, spec.version, target, model, b.CreateVector(pools),
                                 b.CreateVector(tensors), b.CreateVector(kernels),
                                 b.CreateVector(gemms), b.CreateVector(programs), 1, 0, 0, 0,
                                 0, spec.sealed ? kUnsealedChecksum : 0);
  s::FinishExecutableBuffer(b, exe);
  std::vector<uint8_t> bytes(b.GetBufferPointer(), b.GetBufferPointer() + b.GetSize());
  if (spec.sealed)
    EXPECT_TRUE(sealExecutable(bytes));
  return bytes;
}

std::string loadError(std::vector<uint8_t> bytes) {
  auto exe = Executable::loadBytes(std::move(bytes), "step.fb");
  return exe ? "" : exe.status().message();
}

// Verify that a well-formed executable loads and its program is found.
TEST(ExecutableTest, LoadsAWellFormedExecutable) {
  auto exe = Executable::loadBytes(build({}), "step.fb");
  ASSERT_TRUE(exe) << exe.status().message();
  EXPECT_NE(exe->findProgram("train_step"), nullptr);
  EXPECT_EQ(exe->findProgram("forward"), nullptr);
  EXPECT_EQ((*exe)->model()->num_parameters(), 7872);
}

// Verify the checksum: a sealed executable loads; any flipped byte the
// verifier and the semantic checks let through (the kernel's PTX, its name,
// a tensor's offset inside its pool) is refused; one without the field
// (gptc before the checksum) still loads; and sealing needs the field.
TEST(ExecutableTest, ChecksumCatchesCorruption) {
  Spec spec;
  spec.sealed = true;
  std::vector<uint8_t> bytes = build(spec);
  ASSERT_EQ(loadError(bytes), "");
  size_t changed = 0;
  for (size_t i = 0; i < bytes.size(); ++i) {
    std::vector<uint8_t> flipped = bytes;
    flipped[i] ^= 0x01;
    std::string error = loadError(flipped);
    EXPECT_NE(error, "") << "byte " << i << " flipped loads";
    changed += error.find("checksum mismatch") != std::string::npos;
  }
  EXPECT_GT(changed, bytes.size() / 4) << "most flips reach the checksum";
  const char ptx[] = ".version 8.0";
  auto at = std::search(bytes.begin(), bytes.end(), ptx, ptx + sizeof(ptx) - 1);
  ASSERT_NE(at, bytes.end());
  at[1] = 'w';
  EXPECT_EQ(loadError(bytes), "step.fb: checksum mismatch: the executable is corrupt (" +
                                  std::to_string(bytes.size()) + " bytes); compile it again");

  std::vector<uint8_t> unsealed = build({});
  EXPECT_EQ(loadError(unsealed), "");
  Status s = sealExecutable(unsealed);
  ASSERT_FALSE(s);
  EXPECT_NE(s.message().find("no checksum field"), std::string::npos) << s.message();
  std::vector<uint8_t> junk = {1, 2, 3};
  EXPECT_FALSE(sealExecutable(junk));
}

// Verify that every truncation of the file is rejected, never read past.
TEST(ExecutableTest, RejectsEveryTruncation) {
  std::vector<uint8_t> bytes = build({});
  for (size_t n = 0; n < bytes.size(); n += 7) {
    std::vector<uint8_t> cut(bytes.begin(), bytes.begin() + n);
    EXPECT_NE(loadError(cut), "") << "truncated to " << n << " bytes";
  }
}

// Verify that a file of another kind is rejected by its identifier.
TEST(ExecutableTest, RejectsWrongIdentifier) {
  std::vector<uint8_t> bytes = build({});
  bytes[4] = 'X';
  EXPECT_EQ(loadError(bytes), "step.fb: not a gptc executable (no 'GPTX' identifier)");
}

// Verify that a corrupted offset inside the buffer fails verification.
TEST(ExecutableTest, RejectsCorruptOffsets) {
  std::vector<uint8_t> bytes = build({});
  bytes[0] = 0xff; // root table offset far outside the buffer
  bytes[1] = 0xff;
  EXPECT_NE(loadError(bytes).find("corrupt or truncated"), std::string::npos);
}

// Verify the semantic checks, each naming the fault.
TEST(ExecutableTest, RejectsSemanticErrors) {
  auto with = [](std::function<void(Spec &)> edit) {
    Spec spec;
    edit(spec);
    return loadError(build(spec));
  };
  EXPECT_NE(with([](Spec &s) { s.version = 99; }).find("format version 99"), std::string::npos);
  EXPECT_NE(with([](Spec &s) { s.tensorOffset = 1000; }).find("lies outside its pool"),
            std::string::npos);
  EXPECT_NE(with([](Spec &s) { s.tensorBytes = 60; }).find("its shape and type need 64"),
            std::string::npos);
  EXPECT_NE(with([](Spec &s) { s.kernelIndex = 3; }).find("launches kernel 3"),
            std::string::npos);
  EXPECT_NE(with([](Spec &s) { s.gemmIndex = 1; }).find("runs GEMM 1"), std::string::npos);
  EXPECT_NE(with([](Spec &s) { s.stream = 2; }).find("runs on stream 2 of 1"),
            std::string::npos);
  EXPECT_NE(with([](Spec &s) { s.blockX = 2048; }).find("2048 threads per block"),
            std::string::npos);
  EXPECT_NE(with([](Spec &s) { s.argTensor = 5; }).find("refers to tensor 5"),
            std::string::npos);
  EXPECT_NE(with([](Spec &s) { s.numArgs = 2; }).find("passes 1 arguments to gelu_forward"),
            std::string::npos);
  EXPECT_EQ(with([](Spec &s) { s.reduceOp = int(s::ReduceOp::Max); }), "");
  EXPECT_NE(with([](Spec &s) { s.reduceOp = 3; }).find("reduces by an unknown operation (3)"),
            std::string::npos);
}

// Verify that a launch must hand its kernel what the kernel was compiled to
// address (Kernel.arg_bytes): issue 47's re-checksummed byte flips that
// crashed gptrun passed a smaller tensor or a number for a pointer.
TEST(ExecutableTest, LaunchesMatchTheirKernelsArguments) {
  auto with = [](std::function<void(Spec &)> edit) {
    Spec spec;
    spec.sealed = true;
    edit(spec);
    return loadError(build(spec));
  };
  EXPECT_EQ(with([](Spec &s) { s.argBytes = {64}; }), "");
  EXPECT_EQ(with([](Spec &s) { s.argBytes = {32}; }), ""); // reads less than the tensor holds
  EXPECT_NE(with([](Spec &s) { s.argBytes = {128}; })
                .find("passes tensor 0 of 64 bytes as argument 0, where its kernel reads 128"),
            std::string::npos);
  EXPECT_NE(with([](Spec &s) {
              s.argBytes = {64};
              s.scalarArg = true;
            }).find("passes a number as argument 0, where its kernel takes a tensor"),
            std::string::npos);
  EXPECT_NE(with([](Spec &s) { s.argBytes = {0}; })
                .find("passes a tensor as argument 0, where its kernel takes a number"),
            std::string::npos);
  EXPECT_NE(with([](Spec &s) { s.argBytes = {64, 4}; })
                .find("its kernel records 2 argument extents for 1 arguments"),
            std::string::npos);
}

// Verify the fuzzer's findings stay fixed (test/fuzz/regressions): a
// shape vector whose int64 elements are misaligned (the FlatBuffers verifier
// only checks the length field), a LaunchKernel command whose union table is
// absent, a tensor of an element type past the schema's (size 0), a launch
// handing its kernel a smaller tensor than it reads, and a shape whose
// element count wraps around 64 bits to match size_bytes.
TEST(ExecutableTest, RejectsFuzzerFindings) {
  auto exe = Executable::loadFile(GPTC_FUZZ_REGRESSIONS "/executable-misaligned-shape.fb");
  ASSERT_FALSE(exe);
  EXPECT_NE(exe.status().message().find("has a misaligned shape vector"),
            std::string::npos)
      << exe.status().message();
  exe = Executable::loadFile(GPTC_FUZZ_REGRESSIONS "/executable-union-without-table.fb");
  ASSERT_FALSE(exe);
  EXPECT_NE(exe.status().message().find("command without its operands"), std::string::npos)
      << exe.status().message();
  exe = Executable::loadFile(GPTC_FUZZ_REGRESSIONS "/executable-unknown-dtype.fb");
  ASSERT_FALSE(exe);
  EXPECT_NE(exe.status().message().find("has unknown element type"), std::string::npos)
      << exe.status().message();
  // tiny's host executable, one bit of a launch's tensor index flipped and
  // the checksum recomputed (the byte-flip battery of issue 47): its kernel
  // would read 4096 bytes from a 4-byte tensor.
  exe = Executable::loadFile(GPTC_FUZZ_REGRESSIONS "/executable-launch-smaller-tensor.fb");
  ASSERT_FALSE(exe);
  EXPECT_NE(exe.status().message().find(
                "passes tensor 0 of 4 bytes as argument 0, where its kernel reads 4096"),
            std::string::npos)
      << exe.status().message();
  Spec spec;
  spec.shape = {int64_t(1) << 62, 4, 4}; // 2^66 elements: 0 mod 2^64 without the check
  spec.tensorBytes = 0;
  EXPECT_NE(loadError(build(spec)).find("has more elements than fit in 64 bits"),
            std::string::npos);
}

// Verify file loading: a missing file and a directory (which used to
// throw out of ifstream and abort) are named.
TEST(ExecutableTest, LoadFileNamesMissingFile) {
  auto exe = Executable::loadFile("/nonexistent/step.fb");
  ASSERT_FALSE(exe);
  EXPECT_EQ(exe.status().message(), "/nonexistent/step.fb: cannot open");
  exe = Executable::loadFile("/tmp");
  ASSERT_FALSE(exe);
  EXPECT_EQ(exe.status().message(), "/tmp: is a directory, not an executable");
}

// Verify that an endless input is refused before it is read (/dev/zero
// was read until the allocation aborted the process, exit 134).
TEST(ExecutableTest, LoadFileRefusesADevice) {
  auto exe = Executable::loadFile("/dev/zero");
  ASSERT_FALSE(exe);
  EXPECT_EQ(exe.status().message(), "executable /dev/zero: is a device, not a file");
}

} // namespace

//===- make_executable_seed.cpp - writes the step.fb fuzzer's seed --------===//
//
// A small valid executable (the fake model of GptrunTest, without a host
// object): pools, tensors of every role, three programs, launches and
// arguments, so that mutations start from something the loader accepts.
// TWO.fb, if given, gets a two-stream seed for the schedule check: an
// all-reduce between events, a tensor planned over its bytes, a GEMM;
// RACY.fb the same without the all-reduce's wait for its input
// (test/tools/gptc/Inputs/racy-schedule.fb).
//   make_executable_seed OUT.fb [TWO.fb [RACY.fb]]
//
//===----------------------------------------------------------------------===//

#include "test/unit/runtime/ExecutableBuilder.h"

#include <cstdio>

namespace {

bool write(const std::vector<uint8_t> &bytes, const char *path) {
  FILE *f = std::fopen(path, "wb");
  return f && std::fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size() && !std::fclose(f);
}

/// Compute on stream 0, an all-reduce on stream 1 ordered by two events
/// (or, `racy`, not waiting for the launch that writes its input).
std::vector<uint8_t> twoStreams(bool racy) {
  using namespace gptc::testing;
  ExecutableSpec e;
  e.modelName = "fake";
  e.numStreams = 2;
  e.numEvents = 2;
  uint32_t acts = e.addPool("activations", 1024);
  using R = s::TensorRole;
  using D = s::DType;
  uint32_t g = e.addTensor("g", R::Activation, D::F32, {16}, acts, 0);
  uint32_t tmp = e.addTensor("tmp", R::Activation, D::F32, {8}, acts, 32); // over g's bytes
  uint32_t h = e.addTensor("h", R::Activation, D::F32, {16}, acts, 256);
  uint32_t out = e.addTensor("out", R::Output, D::F32, {16}, acts, 512);
  uint32_t k = e.addKernel("k", 1);
  GemmSpec bias;
  bias.m = bias.n = bias.k = 4;
  bias.lda = bias.ldb = bias.ldc = 4;
  bias.epilogue = s::Epilogue::BGradA;
  uint32_t gemm = e.addGemm(bias);
  ProgramSpec &p = e.addProgram("train_step", {}, {out});
  p.launch(k, {tensorArg(tmp)}).launch(k, {tensorArg(g)}).record(0, 0).wait(0, 1).allReduce({g});
  p.commands.back().stream = 1;
  if (racy)
    p.commands.erase(p.commands.begin() + 3);
  p.record(1, 1).gemm(gemm, h, h, out, /*bias=*/h).wait(1, 0).copy(g, h).launch(k, {tensorArg(tmp)});
  return e.build();
}

} // namespace

int main(int argc, char **argv) {
  using namespace gptc::testing;
  if (argc < 2 || argc > 4)
    return 2;
  if (argc >= 3 && !write(twoStreams(false), argv[2]))
    return 1;
  if (argc == 4 && !write(twoStreams(true), argv[3]))
    return 1;
  ExecutableSpec e;
  e.modelName = "fake";
  e.numParameters = 4;
  e.config = {{"n_layer", 1}, {"vocab_size", 16}, {"batch", 2}, {"seq", 4}};
  uint32_t params = e.addPool("params", 256), state = e.addPool("state", 256);
  uint32_t inputs = e.addPool("inputs", 1024), outputs = e.addPool("outputs", 256);
  using R = s::TensorRole;
  using D = s::DType;
  uint32_t w = e.addTensor("w", R::Parameter, D::F32, {4}, params, 0);
  uint32_t m = e.addTensor("w.adam_m", R::OptimizerState, D::F32, {4}, state, 0);
  uint32_t seed = e.addTensor("seed", R::Input, D::I32, {}, inputs, 0);
  uint32_t tokens = e.addTensor("tokens", R::Input, D::I32, {2, 4}, inputs, 256);
  uint32_t targets = e.addTensor("targets", R::Input, D::I32, {2, 4}, inputs, 512);
  uint32_t loss = e.addTensor("loss", R::Output, D::F32, {}, outputs, 0);
  uint32_t init = e.addKernel("init", 3), step = e.addKernel("step", 5);
  e.addProgram("init", {seed}, {w}).launch(init, {tensorArg(w), intArg(4), tensorArg(seed)});
  e.addProgram("train_step", {w, m, tokens, targets}, {w, m, loss})
      .launch(step, {tensorArg(targets), intArg(8), tensorArg(w), tensorArg(m), tensorArg(loss)});
  return write(e.build(), argv[1]) ? 0 : 1;
}

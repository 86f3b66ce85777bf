//===- make_executable_seed.cpp - writes the step.fb fuzzer's seed --------===//
//
// A small valid executable (the fake model of GptrunTest, without a host
// object): pools, tensors of every role, three programs, launches and
// arguments, so that mutations start from something the loader accepts.
//   make_executable_seed OUT.fb
//
//===----------------------------------------------------------------------===//

#include "test/unit/runtime/ExecutableBuilder.h"

#include <cstdio>

int main(int argc, char **argv) {
  using namespace gptc::testing;
  if (argc != 2)
    return 2;
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
  std::vector<uint8_t> bytes = e.build();
  FILE *f = std::fopen(argv[1], "wb");
  if (!f || std::fwrite(bytes.data(), 1, bytes.size(), f) != bytes.size() || std::fclose(f))
    return 1;
  return 0;
}

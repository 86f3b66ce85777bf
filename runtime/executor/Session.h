//===- Session.h - named, checked access to a loaded executable -----------===//
//
// A Session owns an Executable and the Backend that runs it, and speaks in
// names: setInput("tokens", ...), run("train_step"), getOutput("loss").
// Every call checks what the backends trust: the tensor exists, its role
// fits the call, the byte count equals its size, and every Input tensor a
// program reads has been set at least once.
//
// Names can repeat across programs (train_step's "tokens" is (accum, B, T),
// forward's is (B, T)), so the lookups take an optional program: with one,
// a name is looked for among that program's inputs and outputs only;
// without, among all tensors, where it must be unique.
//
//===----------------------------------------------------------------------===//

#ifndef GPTC_RUNTIME_EXECUTOR_SESSION_H
#define GPTC_RUNTIME_EXECUTOR_SESSION_H

#include "runtime/executable/Report.h" // formatBytes
#include "runtime/executor/Backend.h"

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace gptc {

class Session {
public:
  /// Makes the backend for the session's executable (which it must not outlive).
  using BackendFactory = std::function<StatusOr<std::unique_ptr<Backend>>(const Executable &)>;

  static StatusOr<std::unique_ptr<Session>> create(Executable exe,
                                                   const BackendFactory &makeBackend);

  const Executable &executable() const { return *exe_; }
  const schema::Executable &schema() const { return exe_->get(); }
  Backend &backend() { return *backend_; }

  /// The program named `name`, or an error listing the programs there are.
  StatusOr<const schema::Program *> program(const std::string &name) const;
  bool hasProgram(const std::string &name) const { return exe_->findProgram(name); }

  /// The index of the tensor named `name`: among `program`'s inputs and
  /// outputs when a program is named, else the unique one of all tensors.
  StatusOr<uint32_t> findTensor(const std::string &name, const std::string &program = "") const;
  const schema::Tensor &tensor(uint32_t index) const { return *schema().tensors()->Get(index); }
  /// "tokens: I32 (4, 8, 64), 8192 bytes"
  std::string describeTensor(uint32_t index) const;

  /// Copies `size` bytes (the tensor's size exactly) into Input tensor `name`.
  Status setInput(const std::string &name, const void *data, size_t size);
  Status setInput(const std::string &program, const std::string &name, const void *data,
                  size_t size);
  template <typename T>
  Status setInput(const std::string &program, const std::string &name, const std::vector<T> &v) {
    return setInput(program, name, v.data(), v.size() * sizeof(T));
  }

  /// Runs program `name` to completion.
  Status run(const std::string &name);

  /// Copies Output tensor `name` (exactly `size` bytes) to host memory.
  Status getOutput(const std::string &name, void *data, size_t size);
  Status getOutput(const std::string &program, const std::string &name, void *data, size_t size);
  StatusOr<std::vector<uint8_t>> getOutput(const std::string &program, const std::string &name);
  /// An F32 scalar output (loss, grad_norm, lr).
  StatusOr<float> getScalarF32(const std::string &program, const std::string &name);

  /// The asynchronous twins (see the queue in Backend.h), for a step loop
  /// without host syncs: the same checks, by tensor index, and nothing is
  /// waited for. Host memory must come from backend().allocateHost and
  /// stay as it is (or unread) until a later fence has passed.
  Status setInputAsync(uint32_t index, const void *data, size_t size);
  Status launch(const std::string &name);
  Status getOutputAsync(uint32_t index, void *data, size_t size);

  /// Any tensor by index, whatever its role (checkpoints, tests).
  Status writeTensor(uint32_t index, const void *data, size_t size);
  Status readTensor(uint32_t index, void *data, size_t size);
  /// ZeRO-1: the whole tensor of which tensor `index` is this rank's slice
  /// (its Tensor.shards ranks' slices in rank order: `size` must be
  /// size_bytes * shards). A collective: every rank calls it alike.
  Status gatherTensor(uint32_t index, void *data, size_t size);
  /// This session's data-parallel rank (0 on one device).
  int rank() const { return backend_->rank(); }
  /// Sets every tensor of `role` to zero bytes (e.g. OptimizerState).
  Status zeroTensors(schema::TensorRole role);

  struct PoolUsage {
    std::string name;
    uint64_t bytes = 0;
    uint32_t tensors = 0; // tensors placed in it
  };
  std::vector<PoolUsage> pools() const;
  /// "params 474.8 MiB, state 949.6 MiB, activations 12.1 GiB; total 13.5 GiB"
  std::string poolReport() const;

private:
  Session() = default;
  Status setInputAt(uint32_t index, const void *data, size_t size);
  Status getOutputAt(uint32_t index, void *data, size_t size);
  /// The role and byte count checks of setInput/getOutput.
  Status checkIo(uint32_t index, schema::TensorRole role, size_t size) const;
  /// Every Input tensor program `name` reads has been set.
  StatusOr<const schema::Program *> runnable(const std::string &name) const;

  std::unique_ptr<Executable> exe_; // heap: the backend keeps a reference
  std::unique_ptr<Backend> backend_;
  std::vector<bool> written_; // by tensor: an Input set by setInput
};

} // namespace gptc

#endif // GPTC_RUNTIME_EXECUTOR_SESSION_H

//===- Session.cpp - named, checked access to a loaded executable ---------===//

#include "runtime/executor/Session.h"

#include <cstdio>

namespace gptc {

namespace {

std::string nameOf(const schema::Tensor &t) { return t.name() ? t.name()->str() : ""; }

} // namespace

StatusOr<std::unique_ptr<Session>> Session::create(Executable exe,
                                                   const BackendFactory &makeBackend) {
  std::unique_ptr<Session> session(new Session());
  session->exe_ = std::make_unique<Executable>(std::move(exe));
  StatusOr<std::unique_ptr<Backend>> backend = makeBackend(*session->exe_);
  if (!backend)
    return backend.status();
  session->backend_ = std::move(*backend);
  size_t n = session->schema().tensors() ? session->schema().tensors()->size() : 0;
  session->written_.assign(n, false);
  return session;
}

StatusOr<const schema::Program *> Session::program(const std::string &name) const {
  if (const schema::Program *p = exe_->findProgram(name))
    return p;
  std::string have;
  if (schema().programs())
    for (const schema::Program *p : *schema().programs())
      have += (have.empty() ? "" : ", ") + (p->name() ? p->name()->str() : "<unnamed>");
  return Status::error("the executable has no program '" + name +
                       "' (it has: " + (have.empty() ? "none" : have) + ")");
}

StatusOr<uint32_t> Session::findTensor(const std::string &name,
                                       const std::string &programName) const {
  if (!programName.empty()) {
    // Only the program's own tensors: a same-named tensor of another
    // program (train_step's "loss" for forward's) would be silently wrong.
    StatusOr<const schema::Program *> p = program(programName);
    if (!p)
      return p.status();
    std::string reads, writes;
    for (const auto *list : {(*p)->inputs(), (*p)->outputs()})
      if (list)
        for (uint32_t t : *list) {
          if (nameOf(tensor(t)) == name)
            return t;
          std::string &names = list == (*p)->inputs() ? reads : writes;
          schema::TensorRole role = tensor(t).role();
          if (role == schema::TensorRole::Input || role == schema::TensorRole::Output)
            names += (names.empty() ? "" : ", ") + nameOf(tensor(t));
        }
    return Status::error("program '" + programName + "' has no input or output '" + name +
                         "' (its inputs: " + (reads.empty() ? "none" : reads) + "; outputs: " +
                         (writes.empty() ? "none" : writes) + ", besides parameters and state)");
  }
  std::vector<uint32_t> found;
  if (schema().tensors())
    for (uint32_t i = 0; i < schema().tensors()->size(); ++i)
      if (nameOf(tensor(i)) == name)
        found.push_back(i);
  if (found.size() == 1)
    return found[0];
  if (found.empty())
    return Status::error("the executable has no tensor '" + name + "'");
  return Status::error("tensor name '" + name + "' is used by " + std::to_string(found.size()) +
                       " tensors; name the program that reads or writes it");
}

std::string Session::describeTensor(uint32_t index) const {
  const schema::Tensor &t = tensor(index);
  std::string shape;
  if (t.shape())
    for (int64_t d : *t.shape())
      shape += (shape.empty() ? "" : ", ") + std::to_string(d);
  return "'" + nameOf(t) + "' (" + schema::EnumNameTensorRole(t.role()) + ", " +
         schema::EnumNameDType(t.dtype()) + " (" + shape + "), " + std::to_string(t.size_bytes()) +
         " bytes)";
}

Status Session::writeTensor(uint32_t index, const void *data, size_t size) {
  if (index >= written_.size())
    return Status::error("no tensor " + std::to_string(index));
  if (size != tensor(index).size_bytes())
    return Status::error("tensor " + describeTensor(index) + " got " + std::to_string(size) +
                         " bytes");
  if (Status s = backend_->write(index, data); !s)
    return s;
  written_[index] = true;
  return Status::ok();
}

Status Session::readTensor(uint32_t index, void *data, size_t size) {
  if (index >= written_.size())
    return Status::error("no tensor " + std::to_string(index));
  if (size != tensor(index).size_bytes())
    return Status::error("tensor " + describeTensor(index) + " read into " + std::to_string(size) +
                         " bytes");
  return backend_->read(index, data);
}

Status Session::gatherTensor(uint32_t index, void *data, size_t size) {
  if (index >= written_.size())
    return Status::error("no tensor " + std::to_string(index));
  uint64_t shards = tensor(index).shards();
  if (shards == 0 || size != tensor(index).size_bytes() * shards)
    return Status::error("tensor " + describeTensor(index) + " gathered into " +
                         std::to_string(size) + " bytes" +
                         (shards ? "" : ": it is not a shard"));
  return backend_->gatherShards(index, data);
}

Status Session::setInputAt(uint32_t index, const void *data, size_t size) {
  if (tensor(index).role() != schema::TensorRole::Input)
    return Status::error("tensor " + describeTensor(index) + " is not an input");
  return writeTensor(index, data, size);
}

Status Session::setInput(const std::string &name, const void *data, size_t size) {
  return setInput("", name, data, size);
}

Status Session::setInput(const std::string &program, const std::string &name, const void *data,
                         size_t size) {
  StatusOr<uint32_t> index = findTensor(name, program);
  if (!index)
    return index.status();
  return setInputAt(*index, data, size);
}

Status Session::getOutputAt(uint32_t index, void *data, size_t size) {
  if (tensor(index).role() != schema::TensorRole::Output)
    return Status::error("tensor " + describeTensor(index) + " is not an output");
  return readTensor(index, data, size);
}

Status Session::getOutput(const std::string &name, void *data, size_t size) {
  return getOutput("", name, data, size);
}

Status Session::getOutput(const std::string &program, const std::string &name, void *data,
                          size_t size) {
  StatusOr<uint32_t> index = findTensor(name, program);
  if (!index)
    return index.status();
  return getOutputAt(*index, data, size);
}

StatusOr<std::vector<uint8_t>> Session::getOutput(const std::string &program,
                                                  const std::string &name) {
  StatusOr<uint32_t> index = findTensor(name, program);
  if (!index)
    return index.status();
  std::vector<uint8_t> bytes(tensor(*index).size_bytes());
  if (Status s = getOutputAt(*index, bytes.data(), bytes.size()); !s)
    return s;
  return bytes;
}

StatusOr<float> Session::getScalarF32(const std::string &program, const std::string &name) {
  StatusOr<uint32_t> index = findTensor(name, program);
  if (!index)
    return index.status();
  const schema::Tensor &t = tensor(*index);
  if (t.dtype() != schema::DType::F32 || t.size_bytes() != 4)
    return Status::error("tensor " + describeTensor(*index) + " is not an F32 scalar");
  float v = 0;
  if (Status s = getOutputAt(*index, &v, 4); !s)
    return s;
  return v;
}

Status Session::zeroTensors(schema::TensorRole role) {
  for (uint32_t i = 0; i < written_.size(); ++i)
    if (tensor(i).role() == role && tensor(i).size_bytes() > 0)
      if (Status s = backend_->fill(i, 0); !s)
        return s;
  return Status::ok();
}

StatusOr<const schema::Program *> Session::runnable(const std::string &name) const {
  StatusOr<const schema::Program *> p = program(name);
  if (!p)
    return p.status();
  if (const auto *inputs = (*p)->inputs())
    for (uint32_t t : *inputs)
      if (tensor(t).role() == schema::TensorRole::Input && !written_[t])
        return Status::error("program '" + name + "': input " + describeTensor(t) +
                             " was never set");
  return p;
}

Status Session::run(const std::string &name) {
  StatusOr<const schema::Program *> p = runnable(name);
  if (!p)
    return p.status();
  if (Status s = backend_->run(**p); !s)
    return Status::error("program '" + name + "': " + s.message());
  return Status::ok();
}

Status Session::launch(const std::string &name) {
  StatusOr<const schema::Program *> p = runnable(name);
  if (!p)
    return p.status();
  if (Status s = backend_->launch(**p); !s)
    return Status::error("program '" + name + "': " + s.message());
  return Status::ok();
}

Status Session::checkIo(uint32_t index, schema::TensorRole role, size_t size) const {
  if (index >= written_.size())
    return Status::error("no tensor " + std::to_string(index));
  if (tensor(index).role() != role)
    return Status::error("tensor " + describeTensor(index) + " is not an" +
                         (role == schema::TensorRole::Input ? " input" : " output"));
  if (size != tensor(index).size_bytes())
    return Status::error("tensor " + describeTensor(index) + " got " + std::to_string(size) +
                         " bytes");
  return Status::ok();
}

Status Session::setInputAsync(uint32_t index, const void *data, size_t size) {
  if (Status s = checkIo(index, schema::TensorRole::Input, size); !s)
    return s;
  if (Status s = backend_->writeAsync(index, data); !s)
    return s;
  written_[index] = true;
  return Status::ok();
}

Status Session::getOutputAsync(uint32_t index, void *data, size_t size) {
  if (Status s = checkIo(index, schema::TensorRole::Output, size); !s)
    return s;
  return backend_->readAsync(index, data);
}

std::vector<Session::PoolUsage> Session::pools() const {
  std::vector<PoolUsage> out;
  if (!schema().pools())
    return out;
  for (const schema::Pool *p : *schema().pools())
    out.push_back({p->name() ? p->name()->str() : "", p->size_bytes(), 0});
  if (schema().tensors())
    for (const schema::Tensor *t : *schema().tensors())
      ++out[t->pool()].tensors;
  return out;
}

std::string Session::poolReport() const {
  std::string report;
  uint64_t total = 0;
  for (const PoolUsage &p : pools()) {
    report += (report.empty() ? "" : ", ") + p.name + " " + formatBytes(p.bytes);
    total += p.bytes;
  }
  return (report.empty() ? "no pools" : report) + "; total " + formatBytes(total);
}

} // namespace gptc

//===- Executable.cpp - load and check a step.fb executable --------------===//

#include "runtime/executable/Executable.h"

#include "runtime/executable/ScheduleCheck.h"
#include "runtime/support/FileIO.h"
#include "runtime/support/Hash64.h"

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sys/stat.h>

namespace gptc {

namespace {

std::string at(const std::string &what, size_t i) {
  return what + " " + std::to_string(i);
}

Status checkTensorIndex(const schema::Executable &exe, uint64_t index,
                        const std::string &where) {
  size_t n = exe.tensors() ? exe.tensors()->size() : 0;
  if (index >= n)
    return Status::error(where + " refers to tensor " + std::to_string(index) +
                         " but the executable has " + std::to_string(n));
  return Status::ok();
}

Status checkCommand(const schema::Executable &exe, const schema::Command &cmd,
                    const std::string &where) {
  if (cmd.stream() >= exe.num_streams())
    return Status::error(where + " runs on stream " + std::to_string(cmd.stream()) +
                         " of " + std::to_string(exe.num_streams()));
  auto tensor = [&](uint64_t i) { return checkTensorIndex(exe, i, where); };
  // The verifier accepts a union whose type is set but whose table is
  // absent (found by test/fuzz/ExecutableFuzzer).
  if (cmd.op_type() != schema::Op::NONE && !cmd.op())
    return Status::error(where + " has a " + schema::EnumNameOp(cmd.op_type()) +
                         " command without its operands");
  switch (cmd.op_type()) {
  case schema::Op::LaunchKernel: {
    const auto *launch = cmd.op_as_LaunchKernel();
    size_t kernels = exe.kernels() ? exe.kernels()->size() : 0;
    if (launch->kernel() >= kernels)
      return Status::error(where + " launches kernel " + std::to_string(launch->kernel()) +
                           " but the executable has " + std::to_string(kernels));
    if (!launch->grid() || launch->grid()->size() != 3 || !launch->block() ||
        launch->block()->size() != 3)
      return Status::error(where + " needs 3-dimensional grid and block sizes");
    uint64_t threads = 1;
    for (uint32_t d : *launch->block())
      threads *= d;
    for (uint32_t d : *launch->grid())
      if (d == 0)
        return Status::error(where + " has an empty grid");
    if (threads == 0 || threads > 1024)
      return Status::error(where + " has " + std::to_string(threads) +
                           " threads per block (1..1024)");
    const auto *kernel = exe.kernels()->Get(launch->kernel());
    size_t nargs = launch->args() ? launch->args()->size() : 0;
    if (nargs != kernel->num_args())
      return Status::error(where + " passes " + std::to_string(nargs) + " arguments to " +
                           (kernel->name() ? kernel->name()->str() : "a kernel") +
                           ", which takes " + std::to_string(kernel->num_args()));
    const auto *extents = kernel->arg_bytes();
    if (extents && extents->size() != nargs)
      return Status::error(where + ": its kernel records " + std::to_string(extents->size()) +
                           " argument extents for " + std::to_string(nargs) + " arguments");
    for (size_t i = 0; i < nargs; ++i) {
      schema::Arg type = launch->args_type()->Get(i);
      if ((type != schema::Arg::TensorArg && type != schema::Arg::ScalarArg) ||
          !launch->args()->Get(i))
        return Status::error(where + " has no value for argument " + std::to_string(i));
      if (type == schema::Arg::TensorArg)
        if (Status s = tensor(launch->args()->GetAs<schema::TensorArg>(i)->tensor()); !s)
          return s;
      if (!extents)
        continue;
      // The kernel addresses what it was compiled for: a pointer to at least
      // that many bytes, or a number.
      uint64_t need = extents->Get(i);
      if ((need > 0) != (type == schema::Arg::TensorArg))
        return Status::error(where + " passes a " + (need ? "number" : "tensor") +
                             " as argument " + std::to_string(i) + ", where its kernel takes a " +
                             (need ? "tensor" : "number"));
      if (need > 0) {
        uint32_t t = launch->args()->GetAs<schema::TensorArg>(i)->tensor();
        uint64_t have = exe.tensors()->Get(t)->size_bytes();
        if (have < need)
          return Status::error(where + " passes tensor " + std::to_string(t) + " of " +
                               std::to_string(have) + " bytes as argument " + std::to_string(i) +
                               ", where its kernel reads " + std::to_string(need));
      }
    }
    return Status::ok();
  }
  case schema::Op::RunGemm: {
    const auto *gemm = cmd.op_as_RunGemm();
    size_t gemms = exe.gemms() ? exe.gemms()->size() : 0;
    if (gemm->gemm() >= gemms)
      return Status::error(where + " runs GEMM " + std::to_string(gemm->gemm()) +
                           " but the executable has " + std::to_string(gemms));
    for (uint64_t t : {uint64_t(gemm->a()), uint64_t(gemm->b()), uint64_t(gemm->c())})
      if (Status s = tensor(t); !s)
        return s;
    for (int64_t t : {gemm->bias(), gemm->aux(), gemm->a_scale(), gemm->b_scale(),
                      gemm->d_scale(), gemm->amax_d()})
      if (t >= 0)
        if (Status s = tensor(static_cast<uint64_t>(t)); !s)
          return s;
    return Status::ok();
  }
  case schema::Op::Memset:
    return tensor(cmd.op_as_Memset()->tensor());
  case schema::Op::Copy: {
    const auto *copy = cmd.op_as_Copy();
    if (Status s = tensor(copy->src()); !s)
      return s;
    if (Status s = tensor(copy->dst()); !s)
      return s;
    if (exe.tensors()->Get(copy->src())->size_bytes() !=
        exe.tensors()->Get(copy->dst())->size_bytes())
      return Status::error(where + " copies between tensors of different sizes");
    return Status::ok();
  }
  case schema::Op::RecordEvent:
  case schema::Op::WaitEvent: {
    uint32_t event = cmd.op_type() == schema::Op::RecordEvent
                         ? cmd.op_as_RecordEvent()->event()
                         : cmd.op_as_WaitEvent()->event();
    if (event >= exe.num_events())
      return Status::error(where + " uses event " + std::to_string(event) + " of " +
                           std::to_string(exe.num_events()));
    return Status::ok();
  }
  case schema::Op::AllReduce: {
    const auto *ar = cmd.op_as_AllReduce();
    if (ar->op() < schema::ReduceOp::MIN || ar->op() > schema::ReduceOp::MAX)
      return Status::error(where + " reduces by an unknown operation (" +
                           std::to_string(static_cast<int>(ar->op())) + ")");
    if (ar->tensors())
      for (uint32_t t : *ar->tensors())
        if (Status s = tensor(t); !s)
          return s;
    return Status::ok();
  }
  case schema::Op::Shard: {
    // ZeRO-1: pairs of one dtype, dst 1/world_size of src (AllGather: the
    // reverse), for an executable pinned to world_size >= 2 ranks.
    const auto *shard = cmd.op_as_Shard();
    if (shard->kind() < schema::ShardKind::MIN || shard->kind() > schema::ShardKind::MAX)
      return Status::error(where + " has an unknown shard kind (" +
                           std::to_string(static_cast<int>(shard->kind())) + ")");
    if (shard->op() < schema::ReduceOp::MIN || shard->op() > schema::ReduceOp::MAX)
      return Status::error(where + " reduces by an unknown operation (" +
                           std::to_string(static_cast<int>(shard->op())) + ")");
    int64_t world = configValue(exe, "world_size", 0);
    if (world < 2)
      return Status::error(where + " shards over ranks, but the executable's world_size is " +
                           std::to_string(world) + " (ZeRO-1 needs gptc --world-size=N, N >= 2)");
    size_t n = shard->src() ? shard->src()->size() : 0;
    if (n == 0 || !shard->dst() || shard->dst()->size() != n)
      return Status::error(where + " needs as many destinations as sources (at least one)");
    for (size_t i = 0; i < n; ++i) {
      uint32_t src = shard->src()->Get(i), dst = shard->dst()->Get(i);
      if (Status s = tensor(src); !s)
        return s;
      if (Status s = tensor(dst); !s)
        return s;
      const auto *a = exe.tensors()->Get(src), *b = exe.tensors()->Get(dst);
      uint64_t whole = shard->kind() == schema::ShardKind::AllGather ? b->size_bytes()
                                                                     : a->size_bytes();
      uint64_t part = shard->kind() == schema::ShardKind::AllGather ? a->size_bytes()
                                                                    : b->size_bytes();
      if (a->dtype() != b->dtype() || part == 0 ||
          whole != part * static_cast<uint64_t>(world))
        return Status::error(where + " pair " + std::to_string(i) + ": a shard of " +
                             std::to_string(part) + " bytes is not 1/" + std::to_string(world) +
                             " of " + std::to_string(whole) + " bytes of the same type");
    }
    return Status::ok();
  }
  case schema::Op::NONE:
    break;
  }
  return Status::error(where + " has no operation");
}

} // namespace

double optimizerSetting(const schema::Executable &exe, const std::string &key, double fallback) {
  if (const schema::Model *m = exe.model(); m && m->optimizer())
    for (const schema::Hyperparameter *h : *m->optimizer())
      if (h->key() && h->key()->str() == key)
        return h->value();
  return fallback;
}

int64_t configValue(const schema::Executable &exe, const std::string &key, int64_t fallback) {
  if (const schema::Model *m = exe.model(); m && m->config())
    for (const schema::KeyValue *kv : *m->config())
      if (kv->key() && kv->key()->str() == key)
        return kv->value();
  return fallback;
}

uint32_t elementSize(schema::DType dtype) {
  switch (dtype) {
  case schema::DType::F64:
    return 8;
  case schema::DType::F32:
  case schema::DType::I32:
    return 4;
  case schema::DType::BF16:
  case schema::DType::F16:
    return 2;
  case schema::DType::F8E4M3:
  case schema::DType::F8E5M2:
    return 1;
  }
  return 0;
}

Status checkExecutable(const schema::Executable &exe) {
  if (exe.version() != static_cast<uint32_t>(schema::FormatVersion::Current))
    return Status::error("format version " + std::to_string(exe.version()) +
                         ", this runtime reads version " +
                         std::to_string(static_cast<uint32_t>(schema::FormatVersion::Current)) +
                         " (recompile with this gptc)");
  if (!exe.target() || !exe.model())
    return Status::error("no target or model description");
  if (exe.num_streams() == 0)
    return Status::error("needs at least one stream");
  size_t pools = exe.pools() ? exe.pools()->size() : 0;
  if (exe.tensors())
    for (size_t i = 0; i < exe.tensors()->size(); ++i) {
      const auto *t = exe.tensors()->Get(i);
      std::string name = at("tensor", i) + (t->name() ? " '" + t->name()->str() + "'" : "");
      if (t->pool() >= pools)
        return Status::error(name + " is in pool " + std::to_string(t->pool()) +
                             " but the executable has " + std::to_string(pools));
      // An enum value past the schema's passes the verifier; its element
      // size would be 0 (found by test/fuzz/ExecutableFuzzer).
      if (elementSize(t->dtype()) == 0)
        return Status::error(name + " has unknown element type " +
                             std::to_string(static_cast<int>(t->dtype())));
      uint64_t elements = 1;
      // The verifier checks a vector's length field, not that its 8-byte
      // elements are aligned (found by test/fuzz/ExecutableFuzzer); an
      // empty one (a scalar's) is never read.
      if (t->shape() && t->shape()->size() &&
          reinterpret_cast<uintptr_t>(t->shape()->Data()) % alignof(int64_t) != 0)
        return Status::error(name + " has a misaligned shape vector");
      if (t->shape())
        for (int64_t d : *t->shape()) {
          if (d < 0)
            return Status::error(name + " has a negative dimension");
          // A product that wraps around could match any size_bytes.
          if (__builtin_mul_overflow(elements, static_cast<uint64_t>(d), &elements))
            return Status::error(name + " has more elements than fit in 64 bits");
        }
      uint64_t needed = 0;
      if (__builtin_mul_overflow(elements, uint64_t(elementSize(t->dtype())), &needed))
        return Status::error(name + " has more bytes than fit in 64 bits");
      if (needed != t->size_bytes())
        return Status::error(name + " has size " + std::to_string(t->size_bytes()) +
                             " bytes, its shape and type need " +
                             std::to_string(elements * elementSize(t->dtype())));
      uint64_t poolSize = exe.pools()->Get(t->pool())->size_bytes();
      if (t->offset_bytes() > poolSize || t->size_bytes() > poolSize - t->offset_bytes())
        return Status::error(name + " [" + std::to_string(t->offset_bytes()) + ", +" +
                             std::to_string(t->size_bytes()) + ") lies outside its pool of " +
                             std::to_string(poolSize) + " bytes");
      if (t->first_use() > t->last_use())
        return Status::error(name + " has a lifetime that ends before it starts");
      if (t->shards()) {
        uint64_t full = 1;
        bool overflow = !t->full_shape() || t->full_shape()->size() == 0 ||
                        reinterpret_cast<uintptr_t>(t->full_shape()->Data()) % alignof(int64_t);
        if (!overflow)
          for (int64_t d : *t->full_shape())
            overflow |= d < 0 || __builtin_mul_overflow(full, static_cast<uint64_t>(d), &full);
        if (overflow || t->shards() < 2 || elements == 0 ||
            full != elements * static_cast<uint64_t>(t->shards()))
          return Status::error(name + " is a shard of 1/" + std::to_string(t->shards()) +
                               " that its full shape does not match");
      }
    }
  if (exe.programs())
    for (size_t p = 0; p < exe.programs()->size(); ++p) {
      const auto *program = exe.programs()->Get(p);
      std::string pname = program->name() ? program->name()->str() : at("program", p);
      for (const auto *list : {program->inputs(), program->outputs()})
        if (list)
          for (uint32_t t : *list)
            if (Status s = checkTensorIndex(exe, t, "program '" + pname + "'"); !s)
              return s;
      if (program->commands())
        for (size_t c = 0; c < program->commands()->size(); ++c)
          if (Status s = checkCommand(exe, *program->commands()->Get(c),
                                      "program '" + pname + "' " + at("command", c));
              !s)
            return s;
    }
  // Last: it relies on the indices checked above.
  return checkSchedule(exe);
}

namespace {

/// Where the root table stores `checksum` in a verified buffer, or -1.
int64_t checksumOffset(const std::vector<uint8_t> &bytes) {
  const auto *table = reinterpret_cast<const flatbuffers::Table *>(schema::GetExecutable(bytes.data()));
  const uint8_t *field = table->GetAddressOf(schema::Executable::VT_CHECKSUM);
  return field ? field - bytes.data() : -1;
}

/// The Hash64 of `bytes` with the 8 at `offset` read as zero.
uint64_t checksumOf(const std::vector<uint8_t> &bytes, size_t offset) {
  const uint64_t zero = 0;
  Hash64 h;
  h.update(bytes.data(), offset);
  h.update(&zero, 8);
  h.update(bytes.data() + offset + 8, bytes.size() - offset - 8);
  return h.value();
}

bool hasIdentifier(const std::vector<uint8_t> &bytes) {
  return bytes.size() >= 8 && schema::ExecutableBufferHasIdentifier(bytes.data());
}

/// FlatBuffers' verifier; call it after hasIdentifier (it reads the root offset).
bool verifiesSchema(const std::vector<uint8_t> &bytes) {
  flatbuffers::Verifier verifier(bytes.data(), bytes.size());
  return schema::VerifyExecutableBuffer(verifier);
}

} // namespace

Status sealExecutable(std::vector<uint8_t> &bytes) {
  if (!hasIdentifier(bytes) || !verifiesSchema(bytes))
    return Status::error("sealExecutable: not a verified executable buffer");
  int64_t offset = checksumOffset(bytes);
  if (offset < 0)
    return Status::error("sealExecutable: the executable has no checksum field (create it with "
                         "checksum = kUnsealedChecksum)");
  uint64_t sum = checksumOf(bytes, size_t(offset));
  std::memcpy(bytes.data() + offset, &sum, 8);
  return Status::ok();
}

StatusOr<Executable> Executable::loadBytes(std::vector<uint8_t> bytes,
                                           const std::string &origin) {
  if (!hasIdentifier(bytes))
    return Status::error(origin + ": not a gptc executable (no 'GPTX' identifier)");
  if (!verifiesSchema(bytes))
    return Status::error(origin + ": corrupt or truncated executable (FlatBuffers "
                                  "verification failed)");
  // Before the semantic checks: a flipped byte in a kernel or an offset
  // passes them and crashes later.
  if (int64_t offset = checksumOffset(bytes); offset >= 0) {
    uint64_t stored;
    std::memcpy(&stored, bytes.data() + offset, 8);
    if (stored != checksumOf(bytes, size_t(offset)))
      return Status::error(origin + ": checksum mismatch: the executable is corrupt (" +
                           std::to_string(bytes.size()) + " bytes); compile it again");
  }
  if (Status s = checkExecutable(*schema::GetExecutable(bytes.data())); !s)
    return Status::error(origin + ": " + s.message());
  return Executable(std::move(bytes));
}

/// The largest step.fb read: a FlatBuffer's offsets stop at 2 GiB.
constexpr uint64_t kMaxFileBytes = uint64_t(1) << 31;

StatusOr<Executable> Executable::loadFile(const std::string &path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0)
    return Status::error(path + ": cannot open");
  if (S_ISDIR(st.st_mode))
    return Status::error(path + ": is a directory, not an executable");
  // A FlatBuffer cannot pass 2 GiB; a device (/dev/zero was read until the
  // allocation aborted) or a pipe is refused or cut off at that bound.
  if (Status s = checkInputFile(path, kMaxFileBytes, "executable"); !s)
    return s;
  StatusOr<std::string> text = readFile(path, kMaxFileBytes);
  if (!text)
    return Status::error("executable " + text.status().message());
  return loadBytes(std::vector<uint8_t>(text->begin(), text->end()), path);
}

const schema::Program *Executable::findProgram(const std::string &name) const {
  if (const auto *programs = get().programs())
    for (const auto *p : *programs)
      if (p->name() && p->name()->str() == name)
        return p;
  return nullptr;
}

} // namespace gptc

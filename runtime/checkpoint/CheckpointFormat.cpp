//===- CheckpointFormat.cpp - the checkpoint file: bytes out, bytes in ---===//
//
// Writing (atomic, checksummed), parsing and the finiteness check, apart
// from the sessions they come from and go to (Checkpoint.cpp): what the
// checkpoint fuzzer (test/fuzz/CheckpointFuzzer.cpp) links.
//
//===----------------------------------------------------------------------===//

#include "runtime/checkpoint/Checkpoint.h"
#include "runtime/support/FileIO.h"
#include "runtime/support/Hash64.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace gptc::checkpoint {

namespace {

constexpr char kMagic[8] = {'G', 'P', 'T', 'C', 'C', 'K', 'P', 'T'};
// 2 adds the training data's token count and hash; 3 the tokens per data
// position and the optimizer settings, and its identity is the
// architecture's alone. 1 and 2 are still read.
constexpr uint32_t kVersion = kFormatVersion;

/// The file being written: every byte goes through the hash. The first
/// error sticks and later writes are skipped.
class Writer {
public:
  explicit Writer(int fd) : fd(fd) {}
  void bytes(const void *data, size_t size) {
    hash.update(data, size);
    raw(data, size);
  }
  template <typename T> void pod(T v) { bytes(&v, sizeof(v)); }
  void str(const std::string &s) {
    pod(uint32_t(s.size()));
    bytes(s.data(), s.size());
  }
  void checksum() {
    uint64_t v = hash.value();
    raw(&v, sizeof(v));
  }
  const Status &status() const { return st; }

private:
  void raw(const void *data, size_t size) {
    if (st)
      st = writeAll(fd, data, size);
  }
  int fd;
  Hash64 hash;
  Status st = Status::ok();
};

/// Bounds-checked reads over the file's bytes.
class Reader {
public:
  Reader(const std::string &data) : data(data) {}
  bool bytes(void *out, size_t size) {
    if (data.size() - pos < size)
      return false;
    if (size == 0) // an empty tensor's vector has no storage to copy into
      return true;
    std::memcpy(out, data.data() + pos, size);
    pos += size;
    return true;
  }
  template <typename T> bool pod(T &v) { return bytes(&v, sizeof(v)); }
  bool str(std::string &s) {
    uint32_t n;
    if (!pod(n) || data.size() - pos < n)
      return false;
    s.assign(data.data() + pos, n);
    pos += n;
    return true;
  }
  size_t offset() const { return pos; }
  size_t remaining() const { return data.size() - pos; }

private:
  const std::string &data;
  size_t pos = 0;
};

/// Test hook: GPTC_TEST_STALL_CHECKPOINT=step-N.ckpt makes the write of
/// that file stop for good after its first tensor, so that a test can
/// SIGKILL the process in the middle of a write (test/unit/runtime/gptrun).
bool stallRequested(const std::string &path) {
  const char *name = std::getenv("GPTC_TEST_STALL_CHECKPOINT");
  return name && *name && path.size() >= std::strlen(name) &&
         path.compare(path.size() - std::strlen(name), std::string::npos, name) == 0;
}

Status writeBody(Writer &w, const Checkpoint &c, bool stall) {
  w.bytes(kMagic, sizeof(kMagic));
  w.pod(kVersion);
  w.pod(c.identity);
  w.pod(c.step);
  w.pod(c.dataPosition);
  w.pod(c.seed);
  w.pod(c.dataSeed);
  w.pod(c.dataTokens);
  w.pod(c.dataHash);
  w.pod(c.dataStepTokens);
  w.str(c.model);
  w.pod(uint32_t(c.optimizer.size()));
  for (const Setting &o : c.optimizer) {
    w.str(o.key);
    w.pod(o.value);
  }
  w.pod(uint32_t(c.tensors.size()));
  for (const Tensor &t : c.tensors) {
    w.str(t.name);
    w.pod(uint8_t(t.role));
    w.pod(uint8_t(t.dtype));
    w.pod(uint32_t(t.shape.size()));
    for (int64_t d : t.shape)
      w.pod(d);
    w.pod(uint64_t(t.bytes.size()));
    w.bytes(t.bytes.data(), t.bytes.size());
    while (stall)
      ::pause();
  }
  w.checksum();
  return w.status();
}

} // namespace

/// The index of the first element of `n` whose bits under `mask` are all
/// ones (a NaN or an infinity in IEEE formats), or -1. Blocks without one
/// are scanned branch-free, so the common all-finite case vectorizes.
template <typename U> static int64_t firstNonFinite(const uint8_t *bytes, size_t n, U mask) {
  const size_t block = 4096;
  for (size_t start = 0; start < n; start += block) {
    size_t end = std::min(n, start + block);
    bool any = false;
    for (size_t i = start; i < end; ++i) {
      U v;
      std::memcpy(&v, bytes + i * sizeof(U), sizeof(U));
      any |= (v & mask) == mask;
    }
    if (!any)
      continue;
    for (size_t i = start; i < end; ++i) {
      U v;
      std::memcpy(&v, bytes + i * sizeof(U), sizeof(U));
      if ((v & mask) == mask)
        return int64_t(i);
    }
  }
  return -1;
}

Status checkFinite(const Checkpoint &ckpt) {
  for (const Tensor &t : ckpt.tensors) {
    const uint8_t *p = t.bytes.data();
    size_t n = t.bytes.size();
    int64_t bad = -1;
    switch (t.dtype) {
    case schema::DType::F32:
      bad = firstNonFinite<uint32_t>(p, n / 4, 0x7f800000u);
      break;
    case schema::DType::F64:
      bad = firstNonFinite<uint64_t>(p, n / 8, 0x7ff0000000000000ull);
      break;
    case schema::DType::BF16:
      bad = firstNonFinite<uint16_t>(p, n / 2, 0x7f80);
      break;
    case schema::DType::F16:
      bad = firstNonFinite<uint16_t>(p, n / 2, 0x7c00);
      break;
    case schema::DType::F8E5M2:
      bad = firstNonFinite<uint8_t>(p, n, 0x7c);
      break;
    case schema::DType::F8E4M3: // no infinity; S.1111.111 is NaN
      bad = firstNonFinite<uint8_t>(p, n, 0x7f);
      break;
    default:
      break;
    }
    if (bad >= 0) {
      char value[32] = "";
      if (t.dtype == schema::DType::F32) {
        float f;
        std::memcpy(&f, p + size_t(bad) * 4, 4);
        std::snprintf(value, sizeof(value), " (%g)", f);
      }
      return Status::error(
          std::string(t.role == schema::TensorRole::Parameter ? "parameter" : "optimizer state") +
          " '" + t.name + "' holds a non-finite value at element " + std::to_string(bad) + value);
    }
  }
  return Status::ok();
}

Status writeCheckpoint(const std::string &path, const Checkpoint &ckpt) {
  if (Status s = checkFinite(ckpt); !s)
    return Status::error(path + ": not written: " + s.message());
  return writeAtomically(path, [&](int fd) {
    Writer w(fd);
    return writeBody(w, ckpt, stallRequested(path));
  });
}

StatusOr<Checkpoint> parseCheckpoint(const std::string &data, const std::string &origin) {
  auto bad = [&](const std::string &why) { return Status::error(origin + ": " + why); };
  if (data.size() < sizeof(kMagic) || std::memcmp(data.data(), kMagic, sizeof(kMagic)) != 0)
    return bad("not a gptc checkpoint (no GPTCCKPT magic)");
  if (data.size() < sizeof(kMagic) + 4 + 8)
    return bad("truncated checkpoint (" + std::to_string(data.size()) + " bytes)");
  uint32_t version;
  std::memcpy(&version, data.data() + sizeof(kMagic), 4);
  if (version < 1 || version > kVersion)
    return bad("checkpoint format version " + std::to_string(version) + ", this gptrun reads 1 to " +
               std::to_string(kVersion));
  uint64_t stored;
  std::memcpy(&stored, data.data() + data.size() - 8, 8);
  Hash64 h;
  h.update(data.data(), data.size() - 8);
  if (h.value() != stored)
    return bad("checksum mismatch: the checkpoint is truncated or corrupt (" +
               std::to_string(data.size()) + " bytes)");

  Checkpoint c;
  Reader r(data);
  char magic[8];
  uint32_t count = 0;
  if (!r.bytes(magic, 8) || !r.pod(version) || !r.pod(c.identity) || !r.pod(c.step) ||
      !r.pod(c.dataPosition) || !r.pod(c.seed) || !r.pod(c.dataSeed) ||
      (version >= 2 && (!r.pod(c.dataTokens) || !r.pod(c.dataHash))) ||
      (version >= 3 && !r.pod(c.dataStepTokens)) || !r.str(c.model))
    return bad("truncated header");
  c.version = version;
  uint32_t settings = 0;
  if (version >= 3 && !r.pod(settings))
    return bad("truncated header");
  for (uint32_t i = 0; i < settings; ++i) {
    Setting s;
    if (!r.str(s.key) || !r.pod(s.value))
      return bad("bad optimizer setting " + std::to_string(i));
    c.optimizer.push_back(std::move(s));
  }
  if (!r.pod(count))
    return bad("truncated header");
  if (c.step < 0)
    return bad("negative step " + std::to_string(c.step));
  for (uint32_t i = 0; i < count; ++i) {
    Tensor t;
    uint8_t role, dtype;
    uint32_t rank;
    uint64_t size;
    if (!r.str(t.name) || !r.pod(role) || !r.pod(dtype) || !r.pod(rank) || rank > 8)
      return bad("bad entry for tensor " + std::to_string(i));
    t.role = schema::TensorRole(role);
    t.dtype = schema::DType(dtype);
    if (t.role != schema::TensorRole::Parameter && t.role != schema::TensorRole::OptimizerState)
      return bad("tensor '" + t.name + "' has role " + std::to_string(role) +
                 ", not a parameter or optimizer state");
    uint64_t elementBytes = 0;
    switch (t.dtype) {
    case schema::DType::F64:
      elementBytes = 8;
      break;
    case schema::DType::F32:
    case schema::DType::I32:
      elementBytes = 4;
      break;
    case schema::DType::BF16:
    case schema::DType::F16:
      elementBytes = 2;
      break;
    case schema::DType::F8E4M3:
    case schema::DType::F8E5M2:
      elementBytes = 1;
      break;
    }
    if (elementBytes == 0)
      return bad("tensor '" + t.name + "' has unknown element type " + std::to_string(dtype));
    t.shape.resize(rank);
    uint64_t elements = 1;
    for (int64_t &d : t.shape) {
      if (!r.pod(d))
        return bad("bad shape of tensor '" + t.name + "'");
      if (d < 0 || __builtin_mul_overflow(elements, uint64_t(d), &elements))
        return bad("tensor '" + t.name + "' has an impossible shape");
    }
    if (!r.pod(size) || r.remaining() < 8 || size > r.remaining() - 8)
      return bad("tensor '" + t.name + "' overruns the file");
    uint64_t need = 0;
    if (__builtin_mul_overflow(elements, elementBytes, &need) || need != size)
      return bad("tensor '" + t.name + "' holds " + std::to_string(size) +
                 " bytes, its shape and type need " + std::to_string(need));
    t.bytes.resize(size);
    (void)r.bytes(t.bytes.data(), size);
    c.tensors.push_back(std::move(t));
  }
  if (r.remaining() != 8)
    return bad(std::to_string(r.remaining() - 8) + " unexpected bytes after the last tensor");
  return c;
}

StatusOr<Checkpoint> readCheckpoint(const std::string &path) {
  std::string data;
  {
    int fd = ::open(path.c_str(), O_RDONLY);
    if (fd < 0)
      return Status::error(path + ": cannot open: " + errnoText());
    struct stat st;
    if (::fstat(fd, &st) != 0) {
      ::close(fd);
      return Status::error(path + ": cannot stat: " + errnoText());
    }
    if (!S_ISREG(st.st_mode)) {
      ::close(fd);
      return Status::error(path + (S_ISDIR(st.st_mode) ? ": is a directory, not a checkpoint file"
                                                       : ": not a regular file"));
    }
    // Read whole: a file larger than memory would abort in the allocation.
    if (uint64_t(st.st_size) > defaultMaxReadBytes()) {
      ::close(fd);
      return Status::error(path + ": " + std::to_string(st.st_size) +
                           " bytes, more than this machine's memory: not a checkpoint");
    }
    data.resize(size_t(st.st_size));
    size_t got = 0;
    while (got < data.size()) {
      ssize_t n = ::read(fd, data.data() + got, data.size() - got);
      if (n < 0 && errno == EINTR)
        continue;
      if (n <= 0)
        break;
      got += size_t(n);
    }
    ::close(fd);
    data.resize(got);
  }
  return parseCheckpoint(data, path);
}

} // namespace gptc::checkpoint

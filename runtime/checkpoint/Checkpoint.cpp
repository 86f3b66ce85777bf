//===- Checkpoint.cpp - training state on disk, and back ------------------===//

#include "runtime/checkpoint/Checkpoint.h"

#include "runtime/executable/Report.h"
#include "runtime/executor/Session.h"
#include "runtime/support/FileIO.h"
#include "runtime/support/Hash64.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <dirent.h>
#include <fcntl.h>
#include <map>
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

std::string shapeText(const std::vector<int64_t> &shape) {
  std::string s;
  for (int64_t d : shape)
    s += (s.empty() ? "" : ", ") + std::to_string(d);
  return "(" + s + ")";
}

bool isStateRole(schema::TensorRole r) {
  return r == schema::TensorRole::Parameter || r == schema::TensorRole::OptimizerState;
}

/// The config keys the tensors (and the function they compute) depend on.
/// batch, seq and world_size are left out: any of them can resume.
constexpr const char *kArchitecture[] = {"n_layer",    "n_head",           "n_embd",
                                         "vocab_size", "padded_vocab_size", "block_size"};

/// The identity: with `legacy`, format 1 and 2's, which also hashed the
/// model's name and its whole config (batch and T included).
uint64_t identity(const schema::Executable &exe, bool legacy) {
  Hash64 h;
  auto add = [&](const std::string &s) {
    uint64_t n = s.size();
    h.update(&n, 8);
    h.update(s.data(), s.size());
  };
  auto addInt = [&](int64_t v) { h.update(&v, 8); };
  const schema::Model *m = exe.model();
  if (legacy)
    add(m && m->name() ? m->name()->str() : "");
  if (m && m->config())
    for (const schema::KeyValue *kv : *m->config()) {
      std::string key = kv->key() ? kv->key()->str() : "";
      if (!legacy && std::find(std::begin(kArchitecture), std::end(kArchitecture), key) ==
                         std::end(kArchitecture))
        continue;
      add(key);
      addInt(kv->value());
    }
  if (exe.tensors())
    for (const schema::Tensor *t : *exe.tensors()) {
      if (!isStateRole(t->role()))
        continue;
      add(t->name() ? t->name()->str() : "");
      addInt(int64_t(t->role()));
      addInt(int64_t(t->dtype()));
      // A ZeRO-1 shard stands for its whole tensor: checkpoints hold that.
      const auto *shape = t->shards() ? t->full_shape() : t->shape();
      addInt(shape ? shape->size() : 0);
      if (shape)
        for (int64_t d : *shape)
          addInt(d);
    }
  return h.value();
}

/// The settings a resume must keep: the schedule and AdamW's. Not
/// loss_scale (it cancels in the update) nor accum_steps (tokens per step,
/// like the batch).
constexpr const char *kScheduleKeys[] = {"schedule", "lr",    "min_lr",  "warmup_steps",
                                         "total_steps", "beta1", "beta2", "epsilon",
                                         "weight_decay", "grad_clip"};

const Setting *findSetting(const std::vector<Setting> &settings, const std::string &key) {
  for (const Setting &s : settings)
    if (s.key == key)
      return &s;
  return nullptr;
}

std::string valueText(const std::string &key, double v) {
  if (key == "schedule")
    return scheduleKindName(v);
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.6g", v);
  return buf;
}

} // namespace

uint64_t executableIdentity(const schema::Executable &exe, uint32_t format) {
  return identity(exe, format < 3);
}

std::vector<Setting> optimizerSettings(const schema::Executable &exe, double lrScale) {
  std::vector<Setting> out;
  if (exe.model() && exe.model()->optimizer())
    for (const schema::Hyperparameter *h : *exe.model()->optimizer()) {
      Setting s{h->key() ? h->key()->str() : "", h->value()};
      if (s.key == "lr" || s.key == "min_lr")
        s.value *= lrScale;
      out.push_back(s);
    }
  return out;
}

std::string scheduleDifference(const std::vector<Setting> &trained,
                               const std::vector<Setting> &now) {
  std::string out;
  for (const char *key : kScheduleKeys) {
    const Setting *a = findSetting(trained, key), *b = findSetting(now, key);
    // Relative: --lr's scale is a float on one side and a double on the other.
    if (!a || !b || std::fabs(a->value - b->value) <= 1e-6 * std::fabs(a->value))
      continue;
    out += (out.empty() ? "" : ", ") + std::string(key) + " " + valueText(key, a->value) +
           " -> " + valueText(key, b->value);
  }
  return out;
}

std::string describeSettings(const std::vector<Setting> &settings) {
  std::string out;
  for (const char *key : kScheduleKeys)
    if (const Setting *s = findSetting(settings, key))
      out += (out.empty() ? "" : " ") + std::string(key) + "=" + valueText(key, s->value);
  return out.empty() ? "(no optimizer settings recorded)" : out;
}

std::string describeModel(const schema::Executable &exe) {
  const schema::Model *m = exe.model();
  std::string config;
  if (m && m->config())
    for (const schema::KeyValue *kv : *m->config())
      config += (config.empty() ? "" : ", ") + (kv->key() ? kv->key()->str() : "?") + "=" +
                std::to_string(kv->value());
  int params = 0, state = 0;
  if (exe.tensors())
    for (const schema::Tensor *t : *exe.tensors()) {
      params += t->role() == schema::TensorRole::Parameter;
      state += t->role() == schema::TensorRole::OptimizerState;
    }
  return "model '" + (m && m->name() ? m->name()->str() : std::string("?")) + "' (" + config +
         "), " + std::to_string(params) + " parameter and " + std::to_string(state) +
         " state tensors";
}

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
  auto bad = [&](const std::string &why) { return Status::error(path + ": " + why); };
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
    t.shape.resize(rank);
    for (int64_t &d : t.shape)
      if (!r.pod(d))
        return bad("bad shape of tensor '" + t.name + "'");
    if (!r.pod(size) || r.remaining() < 8 || size > r.remaining() - 8)
      return bad("tensor '" + t.name + "' overruns the file");
    t.bytes.resize(size);
    (void)r.bytes(t.bytes.data(), size);
    c.tensors.push_back(std::move(t));
  }
  if (r.remaining() != 8)
    return bad(std::to_string(r.remaining() - 8) + " unexpected bytes after the last tensor");
  return c;
}

StatusOr<Checkpoint> capture(Session &session) {
  const schema::Executable &exe = session.schema();
  Checkpoint c;
  c.identity = executableIdentity(exe);
  c.model = describeModel(exe);
  c.optimizer = optimizerSettings(exe);
  if (exe.tensors())
    for (uint32_t i = 0; i < exe.tensors()->size(); ++i) {
      const schema::Tensor &st = session.tensor(i);
      if (!isStateRole(st.role()))
        continue;
      Tensor t;
      t.name = st.name() ? st.name()->str() : "";
      t.role = st.role();
      t.dtype = st.dtype();
      if (st.shards()) {
        // ZeRO-1: the ranks' slices, gathered (every rank captures).
        t.shape.assign(st.full_shape()->begin(), st.full_shape()->end());
        t.bytes.resize(st.size_bytes() * st.shards());
        if (Status s = session.gatherTensor(i, t.bytes.data(), t.bytes.size()); !s)
          return s;
        c.tensors.push_back(std::move(t));
        continue;
      }
      if (st.shape())
        t.shape.assign(st.shape()->begin(), st.shape()->end());
      t.bytes.resize(st.size_bytes());
      if (Status s = session.readTensor(i, t.bytes.data(), t.bytes.size()); !s)
        return s;
      c.tensors.push_back(std::move(t));
    }
  return c;
}

Status restore(Session &session, const Checkpoint &ckpt, const std::string &origin) {
  const schema::Executable &exe = session.schema();
  if (ckpt.identity != executableIdentity(exe, ckpt.version))
    return Status::error(origin + " is a checkpoint of " + ckpt.model + ", but the executable is " +
                         describeModel(exe) +
                         (ckpt.version < 3 ? "; a format " + std::to_string(ckpt.version) +
                                                 " checkpoint needs the executable's model, batch "
                                                 "and T"
                                           : std::string("; use an executable of that model (any "
                                                         "batch or T)")));
  std::map<std::string, const Tensor *> byName;
  for (const Tensor &t : ckpt.tensors)
    byName[t.name] = &t;
  // Check everything before writing anything.
  std::vector<std::pair<uint32_t, const Tensor *>> plan;
  for (uint32_t i = 0; exe.tensors() && i < exe.tensors()->size(); ++i) {
    const schema::Tensor &st = session.tensor(i);
    if (!isStateRole(st.role()))
      continue;
    std::string name = st.name() ? st.name()->str() : "";
    auto it = byName.find(name);
    if (it == byName.end())
      return Status::error(origin + ": no tensor '" + name + "'");
    const Tensor &t = *it->second;
    // ZeRO-1: the checkpoint holds the whole tensor, the rank its slice.
    std::vector<int64_t> shape;
    const auto *stShape = st.shards() ? st.full_shape() : st.shape();
    if (stShape)
      shape.assign(stShape->begin(), stShape->end());
    uint64_t whole = st.size_bytes() * std::max<uint64_t>(st.shards(), 1);
    if (t.dtype != st.dtype() || t.shape != shape || t.bytes.size() != whole)
      return Status::error(origin + ": tensor '" + name + "' is " + schema::EnumNameDType(t.dtype) +
                           " " + shapeText(t.shape) + ", the executable's " +
                           session.describeTensor(i) +
                           (st.shards() ? " (a 1/" + std::to_string(st.shards()) + " shard of " +
                                              shapeText(shape) + ")"
                                        : std::string()));
    plan.emplace_back(i, &t);
  }
  for (auto [index, t] : plan) {
    const schema::Tensor &st = session.tensor(index);
    size_t offset = st.shards() ? size_t(session.rank()) * st.size_bytes() : 0;
    if (Status s = session.writeTensor(index, t->bytes.data() + offset, st.size_bytes()); !s)
      return s;
  }
  return Status::ok();
}

std::string fileName(int64_t step) {
  char buf[48];
  std::snprintf(buf, sizeof(buf), "step-%08lld.ckpt", static_cast<long long>(step));
  return buf;
}

StatusOr<std::vector<Entry>> list(const std::string &dir) {
  DIR *d = ::opendir(dir.c_str());
  if (!d)
    return Status::error(dir + ": cannot open checkpoint directory: " + errnoText());
  std::vector<Entry> out;
  while (dirent *e = ::readdir(d)) {
    std::string name = e->d_name;
    // Exactly step-<digits>.ckpt: temporaries (".tmp-") never match.
    const std::string prefix = "step-", suffix = ".ckpt";
    if (name.size() <= prefix.size() + suffix.size() || name.compare(0, 5, prefix) != 0 ||
        name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0)
      continue;
    std::string digits = name.substr(5, name.size() - 5 - suffix.size());
    if (digits.size() > 18 || !std::all_of(digits.begin(), digits.end(), ::isdigit))
      continue;
    out.push_back({std::stoll(digits), dir + "/" + name});
  }
  ::closedir(d);
  std::sort(out.begin(), out.end(), [](const Entry &a, const Entry &b) { return a.step < b.step; });
  return out;
}

StatusOr<Removed> removeTemporaries(const std::string &dir) {
  DIR *d = ::opendir(dir.c_str());
  if (!d)
    return Status::error(dir + ": cannot open checkpoint directory: " + errnoText());
  Removed removed;
  while (dirent *e = ::readdir(d)) {
    std::string name = e->d_name;
    // writeAtomically's "<name>.tmp-XXXXXX" of a step-N.ckpt, and gptrun's
    // write probe.
    bool temporary = (name.compare(0, 5, "step-") == 0 && name.find(".ckpt.tmp-") != std::string::npos) ||
                     name.compare(0, 20, ".gptrun-write-test-") == 0;
    if (!temporary)
      continue;
    std::string path = dir + "/" + name;
    struct stat st;
    if (::lstat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode))
      continue;
    if (::unlink(path.c_str()) != 0) {
      Status s = Status::error(path + ": cannot remove: " + errnoText());
      ::closedir(d);
      return s;
    }
    ++removed.files;
    removed.bytes += uint64_t(st.st_size);
  }
  ::closedir(d);
  return removed;
}

StatusOr<std::string> latest(const std::string &dir) {
  StatusOr<std::vector<Entry>> all = list(dir);
  if (!all)
    return all.status();
  if (all->empty())
    return Status::error(dir + ": no checkpoint (step-N.ckpt) to resume from");
  return all->back().path;
}

Status prune(const std::string &dir, int64_t keep, int64_t upTo) {
  StatusOr<std::vector<Entry>> all = list(dir);
  if (!all)
    return all.status();
  // Later steps belong to another run or branch: never ours to delete, and
  // never a reason to delete the checkpoint just written.
  all->erase(std::find_if(all->begin(), all->end(), [&](const Entry &e) { return e.step > upTo; }),
             all->end());
  for (size_t i = 0; i + size_t(std::max<int64_t>(keep, 1)) < all->size(); ++i)
    if (::unlink((*all)[i].path.c_str()) != 0 && errno != ENOENT)
      return Status::error((*all)[i].path + ": cannot delete: " + errnoText());
  return Status::ok();
}

} // namespace gptc::checkpoint

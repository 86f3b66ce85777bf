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

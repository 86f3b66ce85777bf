//===- Report.cpp - what a step.fb holds, for people ---------------------===//

#include "runtime/executable/Report.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <map>
#include <set>
#include <sstream>

namespace gptc {

namespace {

constexpr int kNumRoles = static_cast<int>(schema::TensorRole::MAX) + 1;

std::string str(const flatbuffers::String *s) { return s ? s->str() : std::string(); }

/// "layernorm_forward_12" -> "layernorm_forward": codegen numbers every
/// instance of a kernel family.
std::string kernelFamily(const std::string &name) {
  size_t end = name.size();
  while (end > 0 && std::isdigit(static_cast<unsigned char>(name[end - 1])))
    --end;
  if (end == name.size() || end == 0 || name[end - 1] != '_' || end == 1)
    return name;
  return name.substr(0, end - 1);
}

/// 124475904 -> "124,475,904".
std::string withCommas(uint64_t v) {
  std::string digits = std::to_string(v), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i && (digits.size() - i) % 3 == 0)
      out += ',';
    out += digits[i];
  }
  return out;
}

std::string bytesText(uint64_t bytes) {
  if (bytes < 1024)
    return std::to_string(bytes) + " B";
  return withCommas(bytes) + " B (" + formatBytes(bytes) + ")";
}

ProgramSummary summarizeProgram(const schema::Executable &exe, const schema::Program &p) {
  ProgramSummary s;
  s.name = str(p.name());
  s.liveAtPeak = str(p.live_at_peak());
  if (p.inputs() && exe.tensors())
    for (uint32_t i : *p.inputs()) {
      if (i >= exe.tensors()->size())
        continue;
      const schema::Tensor *t = exe.tensors()->Get(i);
      if (str(t->name()) == "tokens" && t->shape() && t->shape()->size() == 3) {
        s.microBatches = t->shape()->Get(0);
        s.microRows = t->shape()->Get(1);
        s.seq = t->shape()->Get(2);
      }
    }
  std::set<uint32_t> kernels;
  std::map<std::string, uint64_t> byFamily;
  if (p.commands())
    for (const schema::Command *c : *p.commands()) {
      ++s.commands;
      switch (c->op_type()) {
      case schema::Op::LaunchKernel: {
        ++s.launches;
        uint32_t k = c->op_as_LaunchKernel()->kernel();
        kernels.insert(k);
        ++byFamily[kernelFamily(str(exe.kernels()->Get(k)->name()))];
        break;
      }
      case schema::Op::RunGemm: {
        ++s.gemms;
        uint32_t g = c->op_as_RunGemm()->gemm();
        if (exe.gemms() && g < exe.gemms()->size())
          ++s.gemmsByEpilogue[schema::EnumNameEpilogue(exe.gemms()->Get(g)->epilogue())];
        break;
      }
      case schema::Op::AllReduce:
        ++s.collectives;
        break;
      case schema::Op::Shard:
        if (c->op_as_Shard()->kind() == schema::ShardKind::RankSlice)
          ++s.copies;
        else
          ++s.collectives;
        break;
      case schema::Op::RecordEvent:
      case schema::Op::WaitEvent:
        ++s.events;
        break;
      case schema::Op::Memset:
        ++s.memsets;
        break;
      case schema::Op::Copy:
        ++s.copies;
        break;
      case schema::Op::NONE:
        break;
      }
    }
  s.distinctKernels = kernels.size();
  s.launchesByKernel.assign(byFamily.begin(), byFamily.end());
  std::stable_sort(s.launchesByKernel.begin(), s.launchesByKernel.end(),
                   [](const auto &a, const auto &b) { return a.second > b.second; });
  return s;
}

/// "0.001", "1e-08", "100": %g with enough digits for a typed flag.
std::string number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.6g", v);
  return buf;
}

/// The optimizer section: the schedule in words, then the other settings.
void formatOptimizer(std::ostringstream &os,
                     const std::vector<std::pair<std::string, double>> &settings) {
  if (settings.empty()) {
    os << "optimizer: none recorded\n";
    return;
  }
  std::map<std::string, double> byKey(settings.begin(), settings.end());
  auto get = [&](const char *key, double fallback) {
    auto it = byKey.find(key);
    return it == byKey.end() ? fallback : it->second;
  };
  os << "optimizer: AdamW in train_step (gptrun --lr X scales the schedule)\n";
  std::set<std::string> shown;
  if (byKey.count("schedule") && byKey.count("lr")) {
    double kind = get("schedule", 0), warmup = get("warmup_steps", 0);
    os << "  schedule: " << scheduleKindName(kind) << ", lr " << number(get("lr", 0));
    if (kind != 0) {
      if (warmup > 0)
        os << " after " << number(warmup) << " warm-up steps";
      os << ", decaying to min_lr " << number(get("min_lr", 0)) << " by step "
         << number(get("total_steps", 0)) << " (and kept after it)";
    }
    os << "\n";
    shown = {"schedule", "lr", "min_lr", "warmup_steps", "total_steps"};
  }
  for (const auto &[key, value] : settings)
    if (!shown.count(key))
      os << "  " << key << " = " << number(value) << "\n";
}

} // namespace

const char *scheduleKindName(double kind) {
  // gpt.lr_schedule's ScheduleKind values (GPTOps.td).
  if (kind == 0)
    return "constant";
  if (kind == 1)
    return "cosine";
  if (kind == 2)
    return "linear";
  return "unknown";
}

std::string formatBytes(uint64_t bytes) {
  static const char *const kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  if (bytes < 1024)
    return std::to_string(bytes) + " B";
  double v = double(bytes);
  int unit = 0;
  while (v >= 1024 && unit < 4) {
    v /= 1024;
    ++unit;
  }
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f %s", v, kUnits[unit]);
  return buf;
}

ExecutableSummary summarize(const schema::Executable &exe) {
  ExecutableSummary s;
  s.formatVersion = exe.version();
  s.lossScale = optimizerSetting(exe, "loss_scale", 1);
  s.compilerVersion = str(exe.compiler_version());
  if (const schema::Target *t = exe.target())
    s.target = std::string(t->kind() == schema::TargetKind::CUDA ? "cuda" : "host") +
               (t->arch() ? " " + t->arch()->str() : "");
  if (const schema::Model *m = exe.model()) {
    s.modelName = str(m->name());
    s.numParameters = m->num_parameters();
    s.precision = str(m->precision());
    if (m->config())
      for (const schema::KeyValue *kv : *m->config())
        s.config.emplace_back(str(kv->key()), kv->value());
    if (m->optimizer())
      for (const schema::Hyperparameter *h : *m->optimizer())
        s.optimizer.emplace_back(str(h->key()), h->value());
  }
  if (exe.pools())
    for (const schema::Pool *p : *exe.pools()) {
      s.pools.emplace_back(str(p->name()), p->size_bytes());
      s.totalPoolBytes += p->size_bytes();
    }
  s.roleBytes.assign(kNumRoles, 0);
  s.roleTensors.assign(kNumRoles, 0);
  if (exe.tensors())
    for (const schema::Tensor *t : *exe.tensors()) {
      int role = static_cast<int>(t->role());
      if (role < 0 || role >= kNumRoles)
        continue;
      s.roleBytes[role] += t->size_bytes();
      ++s.roleTensors[role];
      if (t->shards()) {
        ++s.shardedTensors;
        s.shardedBytes += t->size_bytes();
        s.shards = t->shards();
      }
    }
  s.parameterBytes = s.roleBytes[static_cast<int>(schema::TensorRole::Parameter)];
  std::map<std::string, uint64_t> types;
  if (exe.gemms())
    for (const schema::Gemm *g : *exe.gemms())
      ++types[schema::EnumNameDType(g->a_type())];
  s.gemmOperandTypes.assign(types.begin(), types.end());
  s.numKernels = exe.kernels() ? exe.kernels()->size() : 0;
  s.numGemms = exe.gemms() ? exe.gemms()->size() : 0;
  s.numStreams = exe.num_streams();
  s.numEvents = exe.num_events();
  if (exe.programs())
    for (const schema::Program *p : *exe.programs())
      s.programs.push_back(summarizeProgram(exe, *p));
  if (const schema::Remat *r = exe.remat()) {
    s.hasRemat = true;
    s.rematBudget = r->budget_bytes();
    s.rematValues = r->values();
    s.rematOps = r->ops();
    s.rematPeakBefore = r->peak_before_bytes();
    s.rematPeakAfter = r->peak_after_bytes();
    s.rematStepFlops = r->step_flops();
    s.rematExtraFlops = r->extra_flops();
  }
  return s;
}

std::string formatReport(const ExecutableSummary &s, const std::string &origin) {
  std::ostringstream os;
  os << "executable: " << origin << "\n";
  os << "  format version " << s.formatVersion << ", written by "
     << (s.compilerVersion.empty() ? "(unknown)" : s.compilerVersion) << "\n";
  os << "  target: " << (s.target.empty() ? "(none)" : s.target) << "\n";

  os << "model: " << (s.modelName.empty() ? "(unnamed)" : s.modelName) << "\n";
  for (const auto &[key, value] : s.config)
    os << "  " << key << " = " << value << "\n";
  os << "  parameters: " << withCommas(uint64_t(std::max<int64_t>(s.numParameters, 0))) << " ("
     << bytesText(s.parameterBytes) << ")\n";
  // Older executables (and gpt-opt's) have no precision; the GEMM operand
  // types are what the precision phase left behind either way.
  os << "  precision: " << (s.precision.empty() ? "not recorded" : s.precision);
  if (s.lossScale != 1)
    os << ", loss scale " << s.lossScale;
  os << "; GEMM A operands:";
  if (s.gemmOperandTypes.empty())
    os << " (no GEMMs)";
  for (const auto &[type, count] : s.gemmOperandTypes)
    os << " " << type << " x" << count;
  os << "\n";
  // Collectives in the step: gptc --world-size pinned N, or left it to run time.
  uint64_t collectives = 0;
  for (const ProgramSummary &p : s.programs)
    collectives += p.collectives;
  int64_t world = 0;
  for (const auto &[key, value] : s.config)
    if (key == "world_size")
      world = value;
  os << "  data parallel: "
     << (!collectives  ? std::string("one device (no collectives)")
         : world > 0   ? "exactly " + std::to_string(world) + " ranks"
                       : std::string("any number of ranks (gptrun --gpus N; one skips the "
                                     "all-reduces)"))
     << "\n";
  if (s.shardedTensors)
    os << "  ZeRO-1: each rank keeps 1/" << s.shards << " of " << s.shardedTensors
       << " AdamW moment tensors: " << bytesText(s.shardedBytes) << " per rank instead of "
       << bytesText(s.shardedBytes * s.shards) << ", "
       << bytesText(s.shardedBytes * (s.shards - 1)) << " saved per rank\n";
  formatOptimizer(os, s.optimizer);

  os << "memory (static plan, every pool allocated once):\n";
  for (const auto &[name, bytes] : s.pools)
    os << "  pool " << name << ": " << bytesText(bytes) << "\n";
  os << "  peak: " << bytesText(s.totalPoolBytes) << "\n";
  // Sums of tensor sizes: the plan overlaps tensors never live together,
  // so a role can exceed its pool.
  os << "tensors by role (bytes summed over tensors, before the plan's reuse):\n";
  for (int r = 0; r < kNumRoles; ++r)
    if (s.roleTensors[r])
      os << "  " << schema::EnumNamesTensorRole()[r] << ": " << s.roleTensors[r] << " tensors, "
         << bytesText(s.roleBytes[r]) << "\n";

  os << "code: " << s.numKernels << " kernels, " << s.numGemms << " GEMM descriptors, "
     << s.numStreams << " streams, " << s.numEvents << " events\n";
  for (const ProgramSummary &p : s.programs) {
    os << "program " << p.name << ": " << p.commands << " commands\n";
    if (p.microBatches > 0)
      os << "  tokens: " << p.microBatches << " micro-batch" << (p.microBatches > 1 ? "es" : "")
         << " of " << p.microRows << " x " << p.seq << " a step\n";
    if (!p.liveAtPeak.empty())
      os << "  activations at their peak: " << p.liveAtPeak << "\n";
    os << "  kernel launches: " << p.launches << " (" << p.distinctKernels
       << " distinct kernels)\n";
    os << "  gemms: " << p.gemms << "\n";
    os << "  collectives: " << p.collectives << "\n";
    os << "  events: " << p.events << " (record + wait)\n";
    if (p.memsets || p.copies)
      os << "  memsets: " << p.memsets << ", copies: " << p.copies << "\n";
    if (!p.gemmsByEpilogue.empty()) {
      os << "  gemm epilogues:";
      const char *sep = " ";
      for (const auto &[epilogue, count] : p.gemmsByEpilogue) {
        os << sep << epilogue << " x" << count;
        sep = ", ";
      }
      os << "\n";
    }
    if (!p.launchesByKernel.empty()) {
      os << "  launches by kernel:\n";
      for (const auto &[family, count] : p.launchesByKernel)
        os << "    " << count << "  " << family << "\n";
    }
  }
  os << "fusion: none recorded (the executable holds kernels, not fusion decisions; see the "
        "launches by kernel)\n";
  if (!s.hasRemat) {
    os << "recompute: none (no --memory-budget)\n";
  } else {
    char pct[32];
    std::snprintf(pct, sizeof(pct), "%.1f",
                  s.rematStepFlops > 0 ? 100.0 * s.rematExtraFlops / s.rematStepFlops : 0.0);
    os << "recompute (--memory-budget " << formatBytes(s.rematBudget) << "): " << s.rematValues
       << " values rebuilt by " << s.rematOps << " ops in the backward; planned peak "
       << formatBytes(s.rematPeakBefore) << " -> " << formatBytes(s.rematPeakAfter) << ", +"
       << pct << "% FLOPs\n";
  }
  return os.str();
}

uint64_t requiredPoolBytes(const schema::Executable &exe) {
  uint64_t total = 0;
  if (exe.pools())
    for (const schema::Pool *p : *exe.pools()) {
      if (p->size_bytes() == 0)
        continue;
      // Mirrors CudaBackend::allocatePools: alignments above cudaMalloc's
      // 256 bytes are padded for.
      uint64_t align = std::max<uint64_t>(p->alignment(), 1);
      total += p->size_bytes() + (align > 256 ? align : 0);
    }
  return total;
}

Status checkMemoryFits(uint64_t requiredBytes, uint64_t freeBytes) {
  if (requiredBytes <= freeBytes)
    return Status::ok();
  return Status::error(
      "the executable's memory pools need " + bytesText(requiredBytes) + " but the GPU has " +
      bytesText(freeBytes) + " free: " + formatBytes(requiredBytes - freeBytes) +
      " over. Recompile with a smaller batch (gptc compile --batch=N; --accum-steps keeps the "
      "tokens per step) or a shorter --seq; `gptc explain STEP.fb` shows the pools");
}

} // namespace gptc

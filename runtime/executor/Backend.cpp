//===- Backend.cpp - checks and helpers shared by the backends ------------===//

#include "runtime/executor/Backend.h"

#include "runtime/blas/GemmCheck.h"

#include <cstring>

namespace gptc {

namespace {

std::string programName(const schema::Program &p) {
  return p.name() ? p.name()->str() : "<unnamed>";
}

} // namespace

Status checkGemmCommands(const schema::Executable &exe) {
  if (!exe.programs())
    return Status::ok();
  for (const schema::Program *p : *exe.programs()) {
    if (!p->commands())
      continue;
    for (size_t c = 0; c < p->commands()->size(); ++c)
      if (const schema::RunGemm *gemm = p->commands()->Get(c)->op_as_RunGemm())
        if (Status s = blas::checkRunGemm(exe, *gemm); !s)
          return Status::error("program '" + programName(*p) + "' command " + std::to_string(c) +
                               ": " + s.message());
  }
  return Status::ok();
}

bool hasCollectives(const schema::Executable &exe) {
  if (exe.programs())
    for (const schema::Program *program : *exe.programs())
      if (program->commands())
        for (const schema::Command *cmd : *program->commands())
          if (cmd->op_type() == schema::Op::AllReduce ||
              (cmd->op_type() == schema::Op::Shard &&
               cmd->op_as_Shard()->kind() != schema::ShardKind::RankSlice))
            return true;
  return false;
}

int64_t worldSize(const schema::Executable &exe) { return configValue(exe, "world_size", 0); }

Status checkWorldSize(const schema::Executable &exe, const Collective *collective) {
  const int ranks = collective ? collective->size() : 1;
  const int64_t world = worldSize(exe);
  if (world > 0 && world != ranks)
    return Status::error("the executable was compiled with --world-size=" + std::to_string(world) +
                         " but runs on " + std::to_string(ranks) + " rank" +
                         (ranks == 1 ? "" : "s") + "; compile it without --world-size to run "
                         "it on any number");
  if (ranks > 1 && !hasCollectives(exe))
    return Status::error("the executable was compiled for one device (gptc --world-size=1, no "
                         "gradient collectives), but runs as rank " +
                         std::to_string(collective->rank()) + " of " + std::to_string(ranks) +
                         ": the ranks would train apart; compile it without --world-size");
  return Status::ok();
}

uint32_t programIndex(const schema::Executable &exe, const schema::Program &program) {
  for (uint32_t i = 0; i < exe.programs()->size(); ++i)
    if (exe.programs()->Get(i) == &program)
      return i;
  return UINT32_MAX;
}

StatusOr<KernelArgs> kernelArgs(const schema::Executable &exe, const schema::LaunchKernel &launch,
                                const std::vector<char *> &poolBases) {
  KernelArgs args;
  size_t n = launch.args() ? launch.args()->size() : 0;
  args.values.resize(n);
  args.argv.resize(n);
  for (size_t i = 0; i < n; ++i) {
    uint64_t &v = args.values[i];
    if (launch.args_type()->Get(i) == schema::Arg::TensorArg) {
      void *p = tensorAddress(exe, poolBases, launch.args()->GetAs<schema::TensorArg>(i)->tensor());
      std::memcpy(&v, &p, sizeof(p));
    } else if (launch.args_type()->Get(i) == schema::Arg::ScalarArg) {
      const auto *s = launch.args()->GetAs<schema::ScalarArg>(i);
      if (s->is_float()) {
        double d = s->f64();
        std::memcpy(&v, &d, 8);
      } else {
        int64_t x = s->i64();
        std::memcpy(&v, &x, 8);
      }
    } else {
      const schema::Kernel *k = exe.kernels()->Get(launch.kernel());
      return Status::error("argument " + std::to_string(i) + " of kernel '" +
                           (k->name() ? k->name()->str() : "?") + "' has no value");
    }
    args.argv[i] = &v;
  }
  return args;
}

StatusOr<LaunchArgTable> launchArgTable(const schema::Executable &exe,
                                        const std::vector<char *> &poolBases) {
  size_t programs = exe.programs() ? exe.programs()->size() : 0;
  LaunchArgTable table(programs);
  for (size_t p = 0; p < programs; ++p) {
    const auto *commands = exe.programs()->Get(p)->commands();
    size_t n = commands ? commands->size() : 0;
    table[p].resize(n);
    for (size_t c = 0; c < n; ++c)
      if (const auto *launch = commands->Get(c)->op_as_LaunchKernel()) {
        StatusOr<KernelArgs> a = kernelArgs(exe, *launch, poolBases);
        if (!a)
          return a.status();
        table[p][c] = std::move(*a);
      }
  }
  return table;
}

} // namespace gptc

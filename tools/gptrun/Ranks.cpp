//===- Ranks.cpp - gptrun on one rank or several --------------------------===//

#include "tools/gptrun/Ranks.h"

#include "runtime/collective/Bootstrap.h"
#include "runtime/collective/HostCollective.h"
#include "runtime/collective/NcclCollective.h"
#include "runtime/device/Device.h"
#include "runtime/executor/Backend.h"
#include "tools/gptrun/Signals.h"
#include "tools/gptrun/Trainer.h"

#include <condition_variable>
#include <cstdio>
#include <functional>
#include <mutex>
#include <thread>

namespace gptc::gptrun {

namespace {

/// The ranks' joint stop decision after each step: everyone waits for
/// everyone, and all stop if any wants to. abort() releases the waiters
/// (they stop) when a rank has failed and will not vote again.
class StopVote {
public:
  explicit StopVote(int ranks) : ranks_(ranks) {}
  bool vote(bool mine) {
    std::unique_lock<std::mutex> lock(mutex_);
    if (aborted_)
      return true;
    any_ |= mine;
    unsigned long round = round_;
    if (++arrived_ == ranks_) {
      result_ = any_;
      any_ = false;
      arrived_ = 0;
      ++round_;
      cv_.notify_all();
      return result_;
    }
    cv_.wait(lock, [&] { return round_ != round || aborted_; });
    return round_ != round ? result_ : true;
  }
  void abort() {
    std::lock_guard<std::mutex> lock(mutex_);
    aborted_ = true;
    cv_.notify_all();
  }

private:
  int ranks_;
  std::mutex mutex_;
  std::condition_variable cv_;
  int arrived_ = 0;
  unsigned long round_ = 0;
  bool any_ = false, result_ = false, aborted_ = false;
};

Status trainOne(const Options &o, RankContext rank) {
  Trainer t(o, std::move(rank));
  if (Status s = t.setUp(); !s)
    return s;
  return t.run();
}

/// Runs `body(r)` for r in [0, n) in threads; `abortAll` is called once,
/// when the first rank fails. Returns that rank's error: the others' are
/// mostly "aborted" echoes of it.
Status inThreads(int n, const std::function<Status(int)> &body,
                 const std::function<void()> &abortAll) {
  std::vector<Status> results(n, Status::ok());
  std::once_flag aborted;
  int first = -1;
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      results[r] = body(r);
      if (!results[r])
        std::call_once(aborted, [&] {
          first = r;
          abortAll();
        });
    });
  for (std::thread &t : threads)
    t.join();
  if (first < 0)
    return Status::ok();
  if (n == 1)
    return results[first];
  return Status::error("rank " + std::to_string(first) + ": " + results[first].message());
}

Status hostRanks(const Options &o, int n) {
  HostGroup group(n);
  StopVote vote(n);
  std::vector<std::unique_ptr<Collective>> members;
  for (int r = 0; r < n; ++r)
    members.push_back(group.member(r));
  return inThreads(
      n,
      [&](int r) {
        RankContext rank{r, n, -1, members[r].get(), [&](bool stop) { return vote.vote(stop); }};
        return trainOne(o, std::move(rank));
      },
      [&] {
        group.abort();
        vote.abort();
      });
}

Status gpuRanks(const Options &o, int n) {
  StatusOr<int> count = device::deviceCount();
  if (!count)
    return Status::error("--gpus " + std::to_string(n) + ": " + count.status().message());
  if (o.device + n > *count)
    return Status::error("--gpus " + std::to_string(n) +
                         (o.device ? " from --device " + std::to_string(o.device) : "") +
                         " needs " + std::to_string(o.device + n) +
                         " GPUs, but cudaGetDeviceCount found " + std::to_string(*count));
  StatusOr<NcclId> id = newNcclId();
  if (!id)
    return id.status();
  StopVote vote(n);
  std::vector<std::unique_ptr<NcclCollective>> comms(n);
  std::mutex commsMutex; // abortAll may run while other ranks still join
  bool abortedAll = false;
  return inThreads(
      n,
      [&](int r) -> Status {
        // ncclCommInitRank blocks until all n threads have called it.
        StatusOr<std::unique_ptr<NcclCollective>> comm =
            NcclCollective::create(*id, r, n, o.device + r);
        if (!comm)
          return comm.status();
        NcclCollective *mine = comm->get();
        {
          std::lock_guard<std::mutex> lock(commsMutex);
          comms[r] = std::move(*comm);
          if (abortedAll) { // another rank failed while this one joined
            mine->abort();
            return Status::error("aborted: another rank failed");
          }
        }
        RankContext rank{r, n, o.device + r, mine, [&](bool stop) { return vote.vote(stop); }};
        return trainOne(o, std::move(rank));
      },
      [&] {
        vote.abort();
        std::lock_guard<std::mutex> lock(commsMutex);
        abortedAll = true;
        for (auto &c : comms)
          if (c)
            c->abort();
      });
}

/// Whether `exe` may run on `ranks` data-parallel ranks (`how` says how
/// they were asked for: "--gpus 4", "torchrun's 4 ranks").
Status checkRanks(const Options &o, const schema::Executable &exe, int ranks,
                  const std::string &how) {
  const int64_t world = worldSize(exe);
  if (world > 0 && world != ranks)
    return Status::error(o.executable + " was compiled with gptc --world-size=" +
                         std::to_string(world) + " but runs with " + how + "; run it on " +
                         std::to_string(world) +
                         " or compile it without --world-size (any number of ranks)");
  if (ranks > 1 && !hasCollectives(exe))
    return Status::error(how + ": " + o.executable +
                         " was compiled for one device (gptc --world-size=1, no gradient "
                         "collectives); compile it without --world-size to run on any number");
  return Status::ok();
}

/// This process is rank env.rank of a launcher's world.
Status launchedRank(const Options &o, const bootstrap::LaunchEnv &env,
                    const schema::Executable &exe) {
  std::string who =
      env.launcher + " rank " + std::to_string(env.rank) + " of " + std::to_string(env.worldSize);
  if (o.gpus > 1)
    return Status::error("--gpus " + std::to_string(o.gpus) + " runs ranks as threads, but " +
                         env.launcher + " started this process as " + who +
                         ": leave --gpus out (the launcher sets the world size)");
  if (o.target && *o.target == "host")
    return Status::error(who + ": --target host runs ranks as threads of one process; use "
                               "--gpus N without a launcher");
  if (Status s = checkRanks(o, exe, env.worldSize,
                           env.launcher + "'s " + std::to_string(env.worldSize) + " ranks");
      !s)
    return s;
  StatusOr<int> count = device::deviceCount();
  if (!count)
    return Status::error(who + ": " + count.status().message());
  // GPU LOCAL_RANK of those this process sees; a launcher that binds one
  // GPU per process (CUDA_VISIBLE_DEVICES) leaves it exactly one: GPU 0.
  const int device = *count == 1 ? 0 : env.localRank;
  if (device >= *count)
    return Status::error(who + " has local rank " + std::to_string(env.localRank) +
                         ", but cudaGetDeviceCount found " + std::to_string(*count) +
                         " GPUs on this host (more processes per node than GPUs?)");
  NcclId id;
  std::thread server;
  Status served = Status::ok();
  if (env.rank == 0) {
    StatusOr<NcclId> fresh = newNcclId();
    if (!fresh)
      return fresh.status();
    id = *fresh;
    // Served while this rank joins: ncclCommInitRank waits for the others.
    server = std::thread(
        [&] { served = bootstrap::serveId(id, env.idPort(), env.worldSize, env.timeoutSeconds); });
  } else {
    StatusOr<std::vector<uint8_t>> got = bootstrap::fetchId(env.masterAddr, env.idPort(), env.rank,
                                                            env.worldSize, env.timeoutSeconds);
    if (!got)
      return got.status();
    id = *got;
  }
  StatusOr<std::unique_ptr<NcclCollective>> comm =
      NcclCollective::create(id, env.rank, env.worldSize, device);
  if (server.joinable())
    server.join();
  if (!served)
    return served;
  if (!comm)
    return comm.status();
  Status trained =
      trainOne(o, RankContext{env.rank, env.worldSize, device, comm->get(), {}});
  if (!trained)
    (*comm)->abort(); // the other processes' collectives fail instead of hanging
  return trained;
}

} // namespace

Status trainRanks(const Options &o) {
  installStopSignals();
  StatusOr<std::optional<bootstrap::LaunchEnv>> env = bootstrap::readLaunchEnv();
  if (!env)
    return env.status();
  StatusOr<Executable> exe = Executable::loadFile(o.executable);
  if (!exe)
    return exe.status();
  const bool host =
      o.target ? *o.target == "host" : (*exe)->target()->kind() == schema::TargetKind::Host;
  if (*env && (*env)->worldSize > 1)
    return launchedRank(o, **env, exe->get());

  const int n = o.gpus > 0 ? o.gpus : 1;
  if (Status s = checkRanks(o, exe->get(), n, "--gpus " + std::to_string(n)); !s)
    return s;
  // One rank needs no collective: the backends skip the step's all-reduces.
  if (n == 1)
    return trainOne(o, {});
  return host ? hostRanks(o, n) : gpuRanks(o, n);
}

} // namespace gptc::gptrun

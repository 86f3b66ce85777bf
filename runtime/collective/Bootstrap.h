//===- Bootstrap.h - how the ranks of a multi-process run find each other -===//
//
// Under a process launcher every gptrun process is one rank. The launcher
// tells it which one through the environment, read in this order:
//   torchrun   RANK, WORLD_SIZE, LOCAL_RANK (and MASTER_ADDR, MASTER_PORT)
//   Slurm      SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID
//   Open MPI   OMPI_COMM_WORLD_RANK, OMPI_COMM_WORLD_SIZE,
//              OMPI_COMM_WORLD_LOCAL_RANK
// MASTER_ADDR and MASTER_PORT are required with all three: rank 0 serves
// the communicator's id over TCP on MASTER_PORT + 1 (MASTER_PORT itself is
// torchrun's own store) and every other rank fetches it from
// MASTER_ADDR:MASTER_PORT+1, retrying until rank 0 listens or the timeout
// passes. GPTC_BOOTSTRAP_TIMEOUT (seconds, default 120) bounds the wait.
//
// The exchange carries opaque bytes, so this file knows nothing of NCCL
// or CUDA and is tested with threads on localhost.
//
//===----------------------------------------------------------------------===//

#ifndef GPTC_RUNTIME_COLLECTIVE_BOOTSTRAP_H
#define GPTC_RUNTIME_COLLECTIVE_BOOTSTRAP_H

#include "runtime/support/Status.h"

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace gptc::bootstrap {

struct LaunchEnv {
  std::string launcher; // "torchrun", "Slurm" or "Open MPI"
  int rank = 0, worldSize = 1, localRank = 0;
  std::string masterAddr;
  int masterPort = 0;
  double timeoutSeconds = 120;
  /// Where rank 0 serves the id: MASTER_PORT + 1.
  int idPort() const { return masterPort + 1; }
};

/// Looks a variable up; null when unset.
using GetEnv = std::function<const char *(const char *)>;

/// The launcher's variables through `getenv`; nullopt when no launcher set
/// any. Errors name the variable and its value.
StatusOr<std::optional<LaunchEnv>> readLaunchEnv(const GetEnv &getenv);
/// The same from the process environment.
StatusOr<std::optional<LaunchEnv>> readLaunchEnv();

/// Rank 0: listens on `port` (all interfaces) and sends `id` to each of
/// the world's other ranks once it has said who it is; returns when all
/// have it, or fails after `timeoutSeconds`. A peer that claims another
/// world size gets an error and so does this call.
Status serveId(const std::vector<uint8_t> &id, int port, int worldSize, double timeoutSeconds);

/// Rank `rank` > 0: connects to `host`:`port` (retrying until rank 0
/// listens) and receives the id; fails after `timeoutSeconds`.
StatusOr<std::vector<uint8_t>> fetchId(const std::string &host, int port, int rank,
                                       int worldSize, double timeoutSeconds);

} // namespace gptc::bootstrap

#endif // GPTC_RUNTIME_COLLECTIVE_BOOTSTRAP_H

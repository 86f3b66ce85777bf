//===- Ranks.h - gptrun on one rank or several ----------------------------===//
//
// Decides how many data-parallel ranks run and where, from --gpus and the
// launcher's environment; the executable's world size (gptc --world-size)
// must agree when it was given, and one compiled without collectives
// (--world-size=1) runs on one rank only:
//
//   no launcher, --gpus 1 (default)  one Trainer, no collective: the step's
//                                  all-reduces are skipped
//   no launcher, --gpus N          N ranks in threads of this process: one
//                                  GPU each through NCCL, or simulated
//                                  ranks (HostGroup) with --target host
//   torchrun / srun / mpirun       this process is one rank of WORLD_SIZE on
//                                  GPU LOCAL_RANK; the NCCL id travels over
//                                  TCP (runtime/collective/Bootstrap.h)
//
// Every rank trains the same steps on its own window of each step's data;
// rank 0 alone prints, logs, validates and writes checkpoints. When a rank
// fails, the others' collectives are aborted so that they fail too instead
// of waiting, and the error of the rank that failed first is returned,
// prefixed with "rank R: ".
//
//===----------------------------------------------------------------------===//

#ifndef GPTC_TOOLS_GPTRUN_RANKS_H
#define GPTC_TOOLS_GPTRUN_RANKS_H

#include "tools/gptrun/Options.h"

namespace gptc::gptrun {

/// The whole run of gptrun, on as many ranks as the options ask for.
Status trainRanks(const Options &options);

} // namespace gptc::gptrun

#endif // GPTC_TOOLS_GPTRUN_RANKS_H

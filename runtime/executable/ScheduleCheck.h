//===- ScheduleCheck.h - prove a program's streams are ordered -----------===//
//
// The Host backend runs a program's streams one after another, so a
// missing WaitEvent never shows there; on CUDA it is a race that corrupts
// a gradient now and then. checkSchedule proves, from the command list
// alone, that no such race exists: for every two commands on different
// streams that touch overlapping bytes of a pool, at least one of them
// writing, an event recorded after the earlier one is waited for before
// the later one (directly or through a chain of events).
//
// The model is CUDA's: commands on one stream run in order;
// WaitEvent(e) on stream t orders t's later commands after everything
// enqueued on the recording stream before the most recent RecordEvent(e)
// in command order (a wait on an event not recorded yet in the program
// orders nothing); each program starts and ends with all streams joined
// (CudaBackend::enqueueJoined), so programs are checked one at a time.
// Hazards are between byte ranges, not tensor indices: the memory planner
// gives different tensors the same bytes. A kernel's tensor arguments
// count as written (the schema has no read/write flags); a GEMM's reads
// and writes follow its epilogue (schema Gemm).
//
//===----------------------------------------------------------------------===//

#ifndef GPTC_RUNTIME_EXECUTABLE_SCHEDULECHECK_H
#define GPTC_RUNTIME_EXECUTABLE_SCHEDULECHECK_H

#include "runtime/schemas/executable_generated.h"
#include "runtime/support/Status.h"

namespace gptc {

/// Proves every program of `exe` free of unordered cross-stream accesses;
/// the error names the program, both commands (index, kind, stream), their
/// tensors and the overlapping bytes. `exe` must have passed
/// checkExecutable's index checks. One pass over the commands with a
/// vector clock per stream and an interval map of each stream's latest
/// accesses per pool; a program on one stream returns at once.
Status checkSchedule(const schema::Executable &exe);

} // namespace gptc

#endif // GPTC_RUNTIME_EXECUTABLE_SCHEDULECHECK_H

//===- Signals.h - SIGINT/SIGTERM stop a training run cleanly -------------===//
//
// The handler only records the signal (async-signal-safe); the training
// loop polls stopSignal() between steps, checkpoints and exits. The
// handlers reset themselves (SA_RESETHAND): a second signal takes the
// default action, so a stuck run can still be interrupted.
//
//===----------------------------------------------------------------------===//

#ifndef GPTC_TOOLS_GPTRUN_SIGNALS_H
#define GPTC_TOOLS_GPTRUN_SIGNALS_H

namespace gptc::gptrun {

/// Installs the SIGINT and SIGTERM handlers.
void installStopSignals();
/// The first stop signal received since installStopSignals(), or 0.
int stopSignal();
/// "SIGINT", "SIGTERM" or "signal N".
const char *signalName(int sig);

} // namespace gptc::gptrun

#endif // GPTC_TOOLS_GPTRUN_SIGNALS_H

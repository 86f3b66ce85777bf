//===- Signals.cpp - SIGINT/SIGTERM stop a training run cleanly -----------===//

#include "tools/gptrun/Signals.h"

#include <csignal>
#include <cstdio>

namespace gptc::gptrun {

namespace {

volatile std::sig_atomic_t received = 0;

extern "C" void onStopSignal(int sig) {
  if (!received)
    received = sig;
}

} // namespace

void installStopSignals() {
  received = 0;
  struct sigaction sa = {};
  sa.sa_handler = onStopSignal;
  sigemptyset(&sa.sa_mask);
  // No SA_RESTART: nothing blocks on a slow call; RESETHAND: the next
  // signal of this kind kills as usual.
  sa.sa_flags = SA_RESETHAND;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
}

int stopSignal() { return received; }

const char *signalName(int sig) {
  if (sig == SIGINT)
    return "SIGINT";
  if (sig == SIGTERM)
    return "SIGTERM";
  static char buf[32];
  std::snprintf(buf, sizeof(buf), "signal %d", sig);
  return buf;
}

} // namespace gptc::gptrun

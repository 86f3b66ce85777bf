//===- OpenSession.h - a Session on the target of choice ------------------===//
//
// The one place that knows both backends, so that code (and tests) using
// only one of them links only that one: the Host backend does not pull in
// cudart or cuBLASLt.
//
//===----------------------------------------------------------------------===//

#ifndef GPTC_RUNTIME_EXECUTOR_OPENSESSION_H
#define GPTC_RUNTIME_EXECUTOR_OPENSESSION_H

#include "runtime/executor/CudaBackend.h"
#include "runtime/executor/Session.h"

#include <optional>

namespace gptc {

struct SessionOptions {
  std::optional<schema::TargetKind> target; // default: the executable's
  CudaBackendOptions cuda;
  /// This rank's collective for a data-parallel executable (a HostGroup
  /// member on the host, an NcclCollective on a GPU); null for one device.
  /// Must outlive the session.
  Collective *collective = nullptr;
};

/// A Session over `exe` on options.target (or the executable's own).
StatusOr<std::unique_ptr<Session>> createSession(Executable exe, const SessionOptions &options);

/// Loads `path` (Executable::loadFile) and creates its Session.
StatusOr<std::unique_ptr<Session>> openSession(const std::string &path,
                                               const SessionOptions &options);

} // namespace gptc

#endif // GPTC_RUNTIME_EXECUTOR_OPENSESSION_H

//===- OpenSession.cpp - a Session on the target of choice ----------------===//

#include "runtime/executor/OpenSession.h"

#include "runtime/executor/HostBackend.h"

namespace gptc {

StatusOr<std::unique_ptr<Session>> createSession(Executable exe, const SessionOptions &options) {
  schema::TargetKind target = options.target.value_or(exe->target()->kind());
  CudaBackendOptions cuda = options.cuda;
  if (options.collective)
    cuda.collective = options.collective;
  return Session::create(std::move(exe), [&](const Executable &e) {
    if (target == schema::TargetKind::Host)
      return createHostRankBackend(e, options.collective);
    return createCudaBackend(e, cuda);
  });
}

StatusOr<std::unique_ptr<Session>> openSession(const std::string &path,
                                               const SessionOptions &options) {
  StatusOr<Executable> exe = Executable::loadFile(path);
  if (!exe)
    return exe.status();
  StatusOr<std::unique_ptr<Session>> session = createSession(std::move(*exe), options);
  if (!session)
    return Status::error(path + ": " + session.status().message());
  return session;
}

} // namespace gptc

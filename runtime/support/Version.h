//===- Version.h - the version every tool prints --------------------------===//
//
// Defined in the build tree's runtime/support/Version.cpp, which
// cmake/WriteVersion.cmake rewrites on every build when `git describe`
// changes: a tool built after a commit names that commit.
//
//===----------------------------------------------------------------------===//

#ifndef GPTC_RUNTIME_SUPPORT_VERSION_H
#define GPTC_RUNTIME_SUPPORT_VERSION_H

namespace gptc {

/// "0.1.0 (git 04540cd1a2b3)", "0.1.0 (git 04540cd1a2b3-dirty)" with
/// uncommitted changes, or "0.1.0" outside a git checkout.
const char *versionString();

} // namespace gptc

#endif // GPTC_RUNTIME_SUPPORT_VERSION_H

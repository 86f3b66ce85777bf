//===- RunTool.h - run a command-line tool from a test --------------------===//

#ifndef GPTC_TEST_UNIT_RUNTIME_RUNTOOL_H
#define GPTC_TEST_UNIT_RUNTIME_RUNTOOL_H

#include <sys/wait.h>

#include <cstdio>
#include <string>

namespace gptc::testing {

struct ToolResult {
  int status = -1;    // exit status, -1 if the tool did not exit normally
  std::string output; // stdout and stderr
};

/// Runs `tool args` through the shell and collects its output and status.
inline ToolResult runTool(const std::string &tool, const std::string &args) {
  ToolResult r;
  std::string command = tool + " " + args + " 2>&1";
  FILE *pipe = popen(command.c_str(), "r");
  if (!pipe)
    return r;
  char buffer[4096];
  size_t n;
  while ((n = fread(buffer, 1, sizeof(buffer), pipe)) > 0)
    r.output.append(buffer, n);
  int status = pclose(pipe);
  r.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

} // namespace gptc::testing

#endif // GPTC_TEST_UNIT_RUNTIME_RUNTOOL_H

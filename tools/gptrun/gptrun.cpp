//===- gptrun.cpp - train a GPT-2 with a gptc executable ------------------===//
//
//   gptrun step.fb --data data/tinyshakespeare_train.bin --steps 100
//   gptrun step.fb --data train.bin --val val.bin --val-every 25 --no-graph
//   gptrun step.fb --data train.bin --gpus 4       (any executable, any N)
//   gptrun step.fb --checkpoint-dir ckpt --resume latest --sample "Once upon"
//
// Exit status: 0 on success, 1 when an input or the run fails, 2 for a
// usage error. See --help (Options.cpp) for the flags and the MFU formula.
//
//===----------------------------------------------------------------------===//

#include "tools/gptrun/Eval.h"
#include "tools/gptrun/Generate.h"
#include "tools/gptrun/Options.h"
#include "tools/gptrun/Ranks.h"

#include "runtime/schemas/executable_generated.h"
#include "runtime/support/Version.h"

#include <cstdio>

int main(int argc, char **argv) {
  using namespace gptc::gptrun;
  gptc::StatusOr<Options> options = parseOptions(std::vector<std::string>(argv + 1, argv + argc));
  if (!options) {
    std::fprintf(stderr, "gptrun: %s (see gptrun --help)\n", options.status().message().c_str());
    return 2;
  }
  if (options->help) {
    std::fputs(helpText(), stdout);
    return 0;
  }
  if (options->version) {
    std::printf("gptrun %s\nexecutable format %u (step.fb, runtime/schemas/executable.fbs)\n",
                gptc::versionString(),
                static_cast<unsigned>(gptc::schema::FormatVersion::Current));
    return 0;
  }
  gptc::Status s = gptc::Status::ok();
  if (options->sample)
    s = sample(*options);
  else if (!options->eval.empty())
    s = evaluate(*options).status();
  else
    s = trainRanks(*options);
  if (!s) {
    std::fflush(stdout);
    std::fprintf(stderr, "gptrun: error: %s\n", s.message().c_str());
    return 1;
  }
  return 0;
}

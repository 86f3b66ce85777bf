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
#include "runtime/support/FileIO.h"
#include "runtime/support/Version.h"

#include <cstdio>

namespace {

/// An error when a file gptrun writes is one of the files it reads (by
/// inode): `--logits-out step.fb` or `--log-dir` over the data would
/// destroy the input.
gptc::Status checkOutputsAreNotInputs(const gptc::gptrun::Options &o) {
  std::vector<std::string> inputs = {o.executable, o.data, o.val, o.initFrom, o.eval,
                                     o.vocabDir + "/encoder.json", o.vocabDir + "/vocab.bpe"};
  if (o.resume != "latest")
    inputs.push_back(o.resume);
  if (!o.initFrom.empty())
    for (const char *name : {"/model.safetensors", "/config.json"})
      inputs.push_back(o.initFrom + name);
  struct Output {
    const char *flag;
    std::string path;
  };
  std::vector<Output> outputs = {{"--logits-out", o.logitsOut},
                                 {"--checkpoint-dir", o.checkpointDir}};
  if (!o.logDir.empty())
    for (const char *name : {"/log.jsonl", "/log.csv"})
      outputs.push_back({"--log-dir", o.logDir + name});
  for (const Output &out : outputs)
    if (!out.path.empty())
      if (gptc::Status s = gptc::checkOutputIsNotInput(out.path, inputs); !s)
        return gptc::Status::error(std::string(out.flag) + " " + s.message());
  return gptc::Status::ok();
}

} // namespace

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
  gptc::Status s = checkOutputsAreNotInputs(*options);
  if (s && options->sample)
    s = sample(*options);
  else if (s && !options->eval.empty())
    s = evaluate(*options).status();
  else if (s)
    s = trainRanks(*options);
  if (!s) {
    std::fflush(stdout);
    std::fprintf(stderr, "gptrun: error: %s\n", s.message().c_str());
    return 1;
  }
  return 0;
}

//===- Options.h - gptrun's command line ----------------------------------===//

#ifndef GPTC_TOOLS_GPTRUN_OPTIONS_H
#define GPTC_TOOLS_GPTRUN_OPTIONS_H

#include "runtime/support/Status.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace gptc::gptrun {

struct Options {
  std::string executable;            // step.fb
  std::string data;                  // --data: training token file
  std::string val;                   // --val: validation token file ("" = none)
  int64_t steps = 10;                // --steps
  int64_t valEvery = 0;              // --val-every (0: after the last step only)
  int64_t valBatches = 20;           // --val-batches
  uint64_t seed = 1337;              // --seed
  std::optional<std::string> target; // --target cuda|host
  bool graph = true;                 // --no-graph turns CUDA graphs off
  bool graphGiven = false;           // --graph or --no-graph was given
  bool gemmAutotune = false;         // --gemm-autotune: time cuBLASLt's candidates
  std::string gemmAlgos;             // --gemm-algos FILE: autotuning's choices kept in FILE
  bool programmaticLaunch = true;    // --pdl / --no-pdl: programmatic dependent launch
  bool overlap = true;               // --no-overlap: wait for each step before the next
  int device = 0;                    // --device
  bool deviceGiven = false;          // --device was given (CUDA only)
  int gpus = 0;                      // --gpus (0: not given; one rank)
  double peakTflops = 0;             // --peak-tflops (0: from the GPU table)
  double lr = 0;                     // --lr (0: the compiled schedule's peak)
  // A schedule set at run time (executables compiled with the default
  // constant schedule): --schedule cosine|linear|constant ("": the compiled
  // one), --warmup-steps, --min-lr (-1: 0), --total-steps (0: --steps).
  std::string schedule;
  int64_t warmupSteps = 0;
  double minLr = -1;
  int64_t totalSteps = 0;
  int64_t checkpointEvery = 0;       // --checkpoint-every (0: after the last step only)
  std::string checkpointDir;         // --checkpoint-dir ("" = no checkpoints)
  int64_t keepCheckpoints = 0;       // --keep-checkpoints (0: keep all)
  std::string resume;                // --resume PATH|latest
  bool newSchedule = false;          // --new-schedule: resume under another schedule
  bool noCheckpoint = false;         // --no-checkpoint: none under --log-dir either
  std::string initFrom;              // --init-from PATH: GPT-2 weights (HF, llm.c, gptc)
  std::string onNan = "stop";        // --on-nan stop|skip
  std::string logDir;                // --log-dir: log.jsonl, log.csv ("" = none)
  bool progress = true;              // --no-progress: never draw the bar
  // --sample PROMPT: generate text instead of training (Generate.h).
  bool sample = false;
  std::string samplePrompt;          // --sample ("" = after <|endoftext|>)
  int64_t sampleTokens = 64;         // --sample-tokens
  double temperature = 1.0;          // --temperature (0: greedy)
  int64_t topK = 40;                 // --top-k (0: no limit)
  std::string vocabDir = "data/gpt2"; // --vocab-dir
  std::string logitsOut;             // --logits-out FILE: the prompt's @logits (safetensors)
  // --eval FILE: HellaSwag-style multiple-choice accuracy instead of training (Eval.h).
  std::string eval;
  int64_t evalLimit = 0;             // --eval-limit N: the first N examples (0: all)
  bool help = false;
  bool version = false;              // --version
};

/// The --help text.
const char *helpText();

/// Parses argv (without argv[0]). Errors are usage errors.
StatusOr<Options> parseOptions(const std::vector<std::string> &args);

/// Once the executable is loaded: --device picks a GPU and --gemm-algos
/// keeps cuBLASLt's choices, so both are refused for an executable of
/// another target (parseOptions refuses them with --target host already).
/// Training and sampling both call it.
Status checkDeviceFlag(const Options &o, bool cudaExecutable);

} // namespace gptc::gptrun

#endif // GPTC_TOOLS_GPTRUN_OPTIONS_H

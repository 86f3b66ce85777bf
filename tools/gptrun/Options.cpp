//===- Options.cpp - gptrun's command line --------------------------------===//

#include "tools/gptrun/Options.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>

namespace gptc::gptrun {

const char *helpText() {
  return R"(gptrun: train a GPT-2 with a gptc executable (step.fb)

usage: gptrun STEP.fb --data TRAIN.bin [options]

Runs program "init" once (input "seed"), zeroes the optimizer state, then
for each step loads an (accum_steps, B, T) batch of tokens and next-token
targets, runs "train_step" and prints its loss, gradient norm and learning
rate. An FP8 executable's "train_step_first" (gptc --fp8-steady-step) runs
the first step of a run from "init" instead. With --val, program "forward" computes the mean loss over (B, T)
validation batches. B, T and accum_steps come from the executable's model
config and its tensors' shapes.

options:
  --data DATA        llm.c token data for training (required): a file, a
                     directory (its *.bin files) or a quoted glob
                     ('fineweb_train_*.bin'), read as one stream in name order
  --val DATA         llm.c token data for validation, in the same forms
  --steps N          training steps (default 10)
  --val-every K      validate every K steps (default 0: after the last step)
  --val-batches M    batches per validation, from the file's start (default 20)
  --seed S           seed of "init", taken mod 2^24 as gptc run-reference does
                     (default 1337)
  --target T         cuda or host (default: the executable's target)
  --no-graph         CUDA: launch every command of a step directly instead of
                     replaying the program's CUDA graph (captured on its
                     second run; the default, which --graph names)
  --gemm-autotune    CUDA: time cuBLASLt's best 8 algorithms per GEMM shape on
                     the first step and keep the fastest (a choice made by
                     timing may differ between runs, and with it the bits;
                     by default the heuristic's first choice, deterministic)
  --gemm-algos FILE  CUDA: --gemm-autotune, keeping its choices in FILE: the
                     algorithms FILE holds are taken without timing, new
                     ones are added to it, so later runs take the same
                     algorithms; a FILE made by another cuBLASLt or GPU is
                     refused
  --no-pdl           CUDA: launch every kernel after the one before it has
                     finished; by default (--pdl) an sm_90 executable's kernels,
                     which wait for the one before them in their prologue,
                     are launched with programmatic dependent launch and start
                     while it drains (the same results, 0.2-0.5% faster)
  --no-overlap       wait for each step's results before starting the next;
                     by default step s+1 (its batch copied from pinned
                     memory) is enqueued before step s's loss is read back
  --device D         CUDA device ordinal (default 0); with --gpus, the first
  --gpus N           data-parallel on N GPUs (devices D..D+N-1), one rank per
                     GPU in threads of this process (default 1, which skips
                     the step's all-reduces); any executable compiled
                     without gptc --world-size runs on any N. With --target
                     host, N simulated ranks. Under torchrun, srun or mpirun
                     each process is one rank instead (see docs/training.md)
  --peak-tflops X    peak for MFU, overriding the GPU table
  --lr X             peak learning rate: scales the compiled schedule (its
                     warm-up and decay shape stay) without recompiling
  --schedule KIND    cosine, linear or constant: the learning-rate schedule
                     set at run time, for an executable compiled with the
                     default constant one (a fine-tune needs no recompile);
                     from --lr (or the compiled lr) to --min-lr X (default 0)
                     over --total-steps N (default --steps), after
                     --warmup-steps W (default 0), as gptc's schedules are

logs:
  --log-dir DIR          append a record per step and per validation to
                         DIR/log.jsonl and DIR/log.csv (gptplot draws them);
                         checkpoints default to DIR/checkpoints: one after
                         the last step at least (--no-checkpoint: none)
  --no-progress          no progress bar; it is drawn (with an ETA) only when
                         stdout is a terminal, plain lines otherwise

checkpoints:
  --checkpoint-dir DIR   write DIR/step-N.ckpt after the last step (and every
                         --checkpoint-every steps); created if missing. A run
                         without --resume refuses a DIR holding checkpoints
  --checkpoint-every N   also checkpoint every N steps (needs a directory)
  --keep-checkpoints K   keep only the newest K checkpoints up to the step
                         written (default: all; later steps are left alone)
  --resume PATH|latest   continue from a checkpoint (latest: the newest in
                         --checkpoint-dir) up to --steps; the losses are
                         bit-identical to an uninterrupted run on the same
                         hardware. A checkpoint of another model is refused
                         (another batch or T is the same model), and so is
                         one trained under another schedule or optimizer
                         setting (gptc --lr, --total-steps, ...; gptrun --lr)
  --new-schedule         with --resume: go on under this executable's
                         schedule although the checkpoint's differs (e.g. a
                         later --total-steps to train longer)
  --no-checkpoint        write no checkpoint, not even under --log-dir
  --init-from PATH       start from GPT-2 weights instead of init (step 0,
                         zero optimizer state): a Hugging Face GPT-2
                         directory (model.safetensors + config.json), a
                         .safetensors file, an llm.c gpt2_*.bin (fp32 or
                         bf16) or a gptc checkpoint's parameters. The model
                         size must match the executable's

sampling:
  --sample PROMPT        generate text instead of training: the parameters
                         come from --resume PATH|latest (or, with a warning,
                         from init with --seed), the prompt ("" starts after
                         <|endoftext|>) must fit in T tokens, and the
                         context window slides once the text outgrows T
  --sample-tokens N      tokens to generate (default 64)
  --temperature X        softmax temperature, 0 for greedy (default 1.0)
  --top-k K              draw from the K most likely tokens, 0 for all
                         (default 40); --seed seeds the draws
  --vocab-dir DIR        GPT-2's encoder.json and vocab.bpe (default data/gpt2)
  --logits-out FILE      before generating, write the prompt's ids ("tokens",
                         I32) and its @logits at each position ("logits", F32,
                         tokens x vocab_size) to FILE, a safetensors file: for
                         comparisons with other implementations

evaluation:
  --eval FILE            multiple-choice accuracy instead of training, on a
                         HellaSwag-format jsonl (hellaswag_val.jsonl from
                         github.com/rowanz/hellaswag: "ctx", 4 "endings",
                         "label"): the ending with the lowest mean loss of its
                         tokens is the choice (acc_norm; acc: the lowest sum),
                         through @logits, B rows per run. Parameters as for
                         --sample; compile with a small T (e.g. --seq=128)
  --eval-limit N         the first N examples only (default: all)

faults:
  --on-nan stop|skip     a non-finite loss or gradient norm: stop (default;
                         exit 1 naming the step, writing no checkpoint of it,
                         so the last one written is the last good one) or
                         skip (undo that step's update from a copy of the
                         parameters and optimizer state taken before each
                         step, and go on with the next batch)
  SIGINT/SIGTERM         finish the step in flight, write a checkpoint (with
                         --checkpoint-dir) and exit 0; a second signal kills

  -h, --help         this text
  --version          the version and the executable format it reads

Each step prints
  step 1/N | loss 10.9876 | norm 1.2345 | lr 3.00e-04 | 123.4 ms | 53,120 tok/s | MFU 12.3% | mem 13.5 GiB
where mem is the GPU's memory in use (cudaMemGetInfo; the pools' total on
the host), the step time is the device's, from reaching the step (the
step before done, and this one enqueued) to its loss in host memory
(gptrun keeps the next step enqueued, so the GPU waits for the host only
where the host is slower than a step; such waits are not counted),
tok/s = accum_steps*B*T / step time and
  MFU = tok/s * (6*N_params + 12*n_layer*T*n_embd) / peak,
peak = the GPU's dense BF16 peak (H100/H200 SXM: 989.5 TFLOP/s, H100 PCIe:
756, H100 NVL: 835, A100: 312). MFU is left out on the host and on GPUs
not in the table (give --peak-tflops).

examples:
  gptrun step.fb --data data/tinyshakespeare_train.bin --steps 100
  gptrun step.fb --data train.bin --val val.bin --val-every 25 --val-batches 10 --no-graph
  gptrun step-host.fb --data train.bin --target host --steps 3
  gptrun step.fb --data train.bin --steps 5000 --checkpoint-dir ckpt --checkpoint-every 500 \
         --keep-checkpoints 3
  gptrun step.fb --data train.bin --steps 5000 --checkpoint-dir ckpt --resume latest
  gptrun step.fb --checkpoint-dir ckpt --resume latest --sample "It is a truth" --top-k 40
  gptrun mini.fb --data train.bin --val val.bin --val-every 20 --steps 200 --log-dir run1
  gptplot run1/log.jsonl -o run1/loss.svg

exit status: 0 on success, 1 when an input or the run fails (missing or bad
file, missing program, no GPU), 2 for a usage error.
)";
}

namespace {

StatusOr<int64_t> parseInt(const std::string &flag, const std::string &text, int64_t min) {
  errno = 0;
  char *end = nullptr;
  long long v = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || *end || errno == ERANGE)
    return Status::error(flag + " wants an integer, got '" + text + "'");
  if (v < min)
    return Status::error(flag + " must be at least " + std::to_string(min) + ", got " + text);
  return int64_t(v);
}

StatusOr<double> parseNonNegative(const std::string &flag, const std::string &text) {
  char *end = nullptr;
  double v = std::strtod(text.c_str(), &end);
  if (text.empty() || *end || !(v >= 0) || !std::isfinite(v))
    return Status::error(flag + " wants a non-negative number, got '" + text + "'");
  return v;
}

/// The --sample flags; false if `flag` is not one of them.
bool parseSampleFlag(const std::string &flag, const std::string &value, Options &o, Status &s) {
  if (flag == "--sample") {
    o.sample = true;
    o.samplePrompt = value;
  } else if (flag == "--sample-tokens") {
    StatusOr<int64_t> v = parseInt(flag, value, 1);
    s = v ? (o.sampleTokens = *v, Status::ok()) : v.status();
  } else if (flag == "--top-k") {
    StatusOr<int64_t> v = parseInt(flag, value, 0);
    s = v ? (o.topK = *v, Status::ok()) : v.status();
  } else if (flag == "--temperature") {
    StatusOr<double> v = parseNonNegative(flag, value);
    s = v ? (o.temperature = *v, Status::ok()) : v.status();
  } else if (flag == "--vocab-dir") {
    s = value.empty() ? Status::error("--vocab-dir needs a non-empty value") : Status::ok();
    o.vocabDir = value;
  } else if (flag == "--eval") {
    s = value.empty() ? Status::error("--eval needs a non-empty value") : Status::ok();
    o.eval = value;
  } else if (flag == "--eval-limit") {
    StatusOr<int64_t> v = parseInt(flag, value, 1);
    s = v ? (o.evalLimit = *v, Status::ok()) : v.status();
  } else if (flag == "--logits-out") {
    s = value.empty() ? Status::error("--logits-out needs a non-empty value") : Status::ok();
    o.logitsOut = value;
  } else {
    return false;
  }
  return true;
}

} // namespace

StatusOr<Options> parseOptions(const std::vector<std::string> &args) {
  Options o;
  std::vector<std::string> positional;
  std::string sampleOnly; // the first of --sample-tokens, --top-k, ... given
  std::string notForEval; // the first of them besides --vocab-dir
  for (size_t i = 0; i < args.size(); ++i) {
    std::string arg = args[i];
    if (arg == "-h" || arg == "--help") {
      o.help = true;
      return o;
    }
    if (arg == "--version") {
      o.version = true;
      return o;
    }
    if (arg.size() < 2 || arg[0] != '-' || arg == "--") {
      positional.push_back(arg);
      continue;
    }
    // --flag=value or --flag value.
    std::string flag = arg, value;
    bool inlineValue = false;
    if (size_t eq = arg.find('='); eq != std::string::npos) {
      flag = arg.substr(0, eq);
      value = arg.substr(eq + 1);
      inlineValue = true;
    }
    if (flag == "--no-progress") {
      if (inlineValue)
        return Status::error("--no-progress takes no value");
      o.progress = false;
      continue;
    }
    if (flag == "--pdl" || flag == "--no-pdl") {
      if (inlineValue)
        return Status::error(flag + " takes no value");
      o.programmaticLaunch = flag == "--pdl";
      continue;
    }
    if (flag == "--gemm-autotune") {
      if (inlineValue)
        return Status::error("--gemm-autotune takes no value");
      o.gemmAutotune = true;
      continue;
    }
    if (flag == "--graph" || flag == "--no-graph") {
      if (inlineValue)
        return Status::error(flag + " takes no value");
      if (o.graphGiven && o.graph != (flag == "--graph"))
        return Status::error("--graph and --no-graph contradict each other");
      o.graph = flag == "--graph";
      o.graphGiven = true;
      continue;
    }
    if (flag == "--no-overlap") {
      if (inlineValue)
        return Status::error("--no-overlap takes no value");
      o.overlap = false;
      continue;
    }
    if (flag == "--new-schedule" || flag == "--no-checkpoint") {
      if (inlineValue)
        return Status::error(flag + " takes no value");
      (flag == "--new-schedule" ? o.newSchedule : o.noCheckpoint) = true;
      continue;
    }
    static const char *const kValued[] = {"--data",      "--val",         "--steps",
                                          "--val-every", "--val-batches", "--seed",
                                          "--target",    "--device",      "--peak-tflops", "--lr",
                                          "--checkpoint-every", "--checkpoint-dir",
                                          "--keep-checkpoints", "--resume", "--on-nan", "--log-dir",
                                          "--gpus",     "--gemm-algos", "--init-from",
                                          "--schedule", "--warmup-steps", "--min-lr",
                                          "--total-steps"};
    static const char *const kSampleValued[] = {"--sample", "--sample-tokens", "--temperature",
                                                "--top-k", "--vocab-dir", "--logits-out",
                                                "--eval", "--eval-limit"};
    bool known = false;
    for (const char *k : kValued)
      known |= flag == k;
    for (const char *k : kSampleValued)
      known |= flag == k;
    if (!known)
      return Status::error("unknown option '" + flag + "'");
    if (!inlineValue) {
      if (i + 1 >= args.size())
        return Status::error(flag + " needs a value");
      value = args[++i];
    }
    auto integer = [&](int64_t min, auto &out) -> Status {
      StatusOr<int64_t> v = parseInt(flag, value, min);
      if (!v)
        return v.status();
      out = static_cast<std::decay_t<decltype(out)>>(*v);
      return Status::ok();
    };
    if (Status s = Status::ok(); parseSampleFlag(flag, value, o, s)) {
      if (!s)
        return s;
      bool evalFlag = flag == "--eval" || flag == "--eval-limit";
      if (flag != "--sample" && !evalFlag && sampleOnly.empty())
        sampleOnly = flag;
      if (flag != "--sample" && !evalFlag && flag != "--vocab-dir" && notForEval.empty())
        notForEval = flag; // --eval takes --vocab-dir too

      continue;
    }
    Status s = Status::ok();
    if (flag == "--data")
      o.data = value;
    else if (flag == "--val")
      o.val = value;
    else if (flag == "--steps")
      s = integer(1, o.steps);
    else if (flag == "--val-every")
      s = integer(0, o.valEvery);
    else if (flag == "--val-batches")
      s = integer(1, o.valBatches);
    else if (flag == "--seed")
      s = integer(0, o.seed);
    else if (flag == "--device")
      s = integer(0, o.device), o.deviceGiven = true;
    else if (flag == "--gpus")
      s = integer(1, o.gpus);
    else if (flag == "--checkpoint-every")
      s = integer(1, o.checkpointEvery);
    else if (flag == "--keep-checkpoints")
      s = integer(1, o.keepCheckpoints);
    else if (flag == "--gemm-algos") {
      if (value.empty())
        return Status::error("--gemm-algos needs a non-empty value");
      o.gemmAlgos = value;
      o.gemmAutotune = true;
    }
    else if (flag == "--checkpoint-dir" || flag == "--resume" || flag == "--log-dir" ||
             flag == "--init-from") {
      if (value.empty())
        return Status::error(flag + " needs a non-empty value");
      (flag == "--resume"     ? o.resume
       : flag == "--log-dir"  ? o.logDir
       : flag == "--init-from" ? o.initFrom
                              : o.checkpointDir) = value;
    }
    else if (flag == "--on-nan") {
      if (value != "stop" && value != "skip")
        return Status::error("--on-nan is stop or skip, got '" + value + "'");
      o.onNan = value;
    } else if (flag == "--target") {
      if (value != "cuda" && value != "host")
        return Status::error("--target is cuda or host, got '" + value + "'");
      o.target = value;
    } else if (flag == "--schedule") {
      if (value != "cosine" && value != "linear" && value != "constant")
        return Status::error("--schedule is cosine, linear or constant, got '" + value + "'");
      o.schedule = value;
    } else if (flag == "--warmup-steps" || flag == "--total-steps") {
      StatusOr<int64_t> v = parseInt(flag, value, flag == "--warmup-steps" ? 0 : 1);
      if (!v)
        return v.status();
      (flag == "--warmup-steps" ? o.warmupSteps : o.totalSteps) = *v;
    } else if (flag == "--min-lr") {
      char *end = nullptr;
      o.minLr = std::strtod(value.c_str(), &end);
      if (value.empty() || *end || !(o.minLr >= 0) || !std::isfinite(o.minLr))
        return Status::error("--min-lr wants a number >= 0, got '" + value + "'");
    } else if (flag == "--lr") {
      char *end = nullptr;
      o.lr = std::strtod(value.c_str(), &end);
      if (value.empty() || *end || !(o.lr > 0) || !std::isfinite(o.lr))
        return Status::error("--lr wants a positive number, got '" + value + "'");
    } else if (flag == "--peak-tflops") {
      char *end = nullptr;
      o.peakTflops = std::strtod(value.c_str(), &end);
      if (value.empty() || *end || !(o.peakTflops > 0) || !std::isfinite(o.peakTflops))
        return Status::error("--peak-tflops wants a positive number, got '" + value + "'");
    }
    if (!s)
      return s;
  }
  if (positional.empty())
    return Status::error("no executable given (gptrun STEP.fb --data TRAIN.bin)");
  if (positional.size() > 1)
    return Status::error("one executable only, got '" + positional[0] + "' and '" + positional[1] +
                         "'");
  o.executable = positional[0];
  if (o.sample && !o.eval.empty())
    return Status::error("--sample and --eval are two modes: pick one");
  if (o.evalLimit && o.eval.empty())
    return Status::error("--eval-limit applies to --eval only");
  if (o.data.empty() && !o.sample && o.eval.empty())
    return Status::error("--data TRAIN.bin is required");
  if (!o.eval.empty() && !notForEval.empty())
    return Status::error(notForEval + " applies to --sample only");
  if (!o.sample && o.eval.empty() && !sampleOnly.empty())
    return Status::error(sampleOnly + " applies to --sample only");
  if (o.noCheckpoint && (!o.checkpointDir.empty() || o.checkpointEvery || o.keepCheckpoints))
    return Status::error(std::string("--no-checkpoint contradicts ") +
                         (!o.checkpointDir.empty() ? "--checkpoint-dir"
                          : o.checkpointEvery      ? "--checkpoint-every"
                                                   : "--keep-checkpoints"));
  if (o.newSchedule && o.resume.empty())
    return Status::error("--new-schedule applies to --resume only");
  bool scheduleFlags = o.warmupSteps || o.minLr >= 0 || o.totalSteps;
  if (scheduleFlags && o.schedule.empty())
    return Status::error("--warmup-steps, --min-lr and --total-steps shape a --schedule "
                         "(cosine, linear or constant)");
  if (!o.schedule.empty() && (o.sample || !o.eval.empty()))
    return Status::error("--schedule applies to training only");
  if (!o.schedule.empty() && o.totalSteps && o.totalSteps <= o.warmupSteps &&
      o.schedule != "constant")
    return Status::error("--total-steps " + std::to_string(o.totalSteps) +
                         " must exceed --warmup-steps " + std::to_string(o.warmupSteps));
  // A training run with a log keeps its model too (issue 46); sampling and
  // evaluation only read checkpoints.
  bool training = !o.sample && o.eval.empty();
  if (o.checkpointDir.empty() && !o.logDir.empty() &&
      ((training && !o.noCheckpoint) || o.resume == "latest"))
    o.checkpointDir = o.logDir + "/checkpoints";
  if (o.checkpointDir.empty() && (o.checkpointEvery || o.keepCheckpoints))
    return Status::error(std::string(o.checkpointEvery ? "--checkpoint-every" : "--keep-checkpoints") +
                         " needs --checkpoint-dir DIR (or --log-dir DIR)");
  if (!o.initFrom.empty() && !o.resume.empty())
    return Status::error("--init-from and --resume both give the parameters: pick one (a "
                         "checkpoint resumes with --resume; --init-from starts a new run)");
  if (o.checkpointDir.empty() && o.resume == "latest")
    return Status::error("--resume latest needs --checkpoint-dir DIR (or --log-dir DIR)");
  if (o.graphGiven && o.target && *o.target == "host")
    return Status::error(std::string(o.graph ? "--graph" : "--no-graph") +
                         " applies to the CUDA target only");
  if (o.deviceGiven && o.target && *o.target == "host")
    return Status::error("--device applies to the CUDA target only");
  if (!o.gemmAlgos.empty() && o.target && *o.target == "host")
    return Status::error("--gemm-algos applies to the CUDA target only");
  return o;
}

Status checkDeviceFlag(const Options &o, bool cudaExecutable) {
  if (o.deviceGiven && !cudaExecutable)
    return Status::error("--device applies to the CUDA target only (" + o.executable +
                         " is a host executable)");
  if (!o.gemmAlgos.empty() && !cudaExecutable)
    return Status::error("--gemm-algos applies to the CUDA target only (" + o.executable +
                         " is a host executable)");
  return Status::ok();
}

} // namespace gptc::gptrun

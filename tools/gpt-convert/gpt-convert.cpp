//===- gpt-convert.cpp - GPT-2 weights to Hugging Face and llm.c ----------===//
//
//   gpt-convert step.fb ckpt/step-00000200.ckpt --hf out/gpt2-austen
//   gpt-convert step.fb ckpt/step-00000200.ckpt --llmc gpt2_austen.bin --bf16
//
// Import needs no tool: `gptrun --init-from PATH` reads the same inputs
// straight into a run, as nanoGPT's init_from does, so a fine-tune is one
// command. Export is a tool of its own because it needs no GPU and no
// session: a checkpoint written on the device converts anywhere. The
// executable gives the model's config (n_head is in no weight's shape).
//
// Exit status: 0 on success, 1 when an input cannot be read or converted,
// 2 for a usage error.
//
//===----------------------------------------------------------------------===//

#include "runtime/checkpoint/Gpt2Weights.h"
#include "runtime/executable/Executable.h"
#include "runtime/support/Version.h"

#include <cstdio>
#include <string>
#include <sys/stat.h>
#include <vector>

namespace {

const char *kHelp = R"(gpt-convert: GPT-2 weights as a Hugging Face directory or an llm.c file

usage: gpt-convert STEP.fb INPUT (--hf DIR | --llmc FILE [--bf16])

STEP.fb is the executable INPUT belongs to (it gives the model's config).
INPUT is a gptc checkpoint (step-N.ckpt), a Hugging Face GPT-2 directory
(model.safetensors + config.json), a .safetensors file or an llm.c
gpt2_*.bin; a file of another model size is refused.

options:
  --hf DIR      write DIR/model.safetensors (F32, vocabulary unpadded) and
                DIR/config.json: transformers.GPT2LMHeadModel.from_pretrained(DIR)
                loads it as it is
  --llmc FILE   write an llm.c checkpoint (version 3, fp32)
  --bf16        with --llmc: version 5, bf16 (rounded to nearest even)
  -h, --help    this text
  --version     the version

Outputs are written atomically and never over INPUT.

examples:
  gptrun step.fb --data train.bin --steps 300 --init-from gpt2-hf --checkpoint-dir ckpt
  gpt-convert step.fb ckpt/step-00000300.ckpt --hf gpt2-finetuned
  gpt-convert step.fb gpt2-hf --llmc gpt2_124M.bin
)";

int usage(const std::string &message) {
  std::fprintf(stderr, "gpt-convert: %s (see gpt-convert --help)\n", message.c_str());
  return 2;
}

int fail(const std::string &message) {
  std::fprintf(stderr, "gpt-convert: %s\n", message.c_str());
  return 1;
}

/// Whether `a` and `b` name the same existing file.
bool sameFile(const std::string &a, const std::string &b) {
  struct stat sa, sb;
  return ::stat(a.c_str(), &sa) == 0 && ::stat(b.c_str(), &sb) == 0 && sa.st_dev == sb.st_dev &&
         sa.st_ino == sb.st_ino;
}

} // namespace

int main(int argc, char **argv) {
  using namespace gptc;
  std::vector<std::string> positional;
  std::string hf, llmc;
  bool bf16 = false;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "-h" || arg == "--help") {
      std::fputs(kHelp, stdout);
      return 0;
    }
    if (arg == "--version") {
      std::printf("gpt-convert %s\n", versionString());
      return 0;
    }
    if (arg == "--bf16") {
      bf16 = true;
      continue;
    }
    if (arg == "--hf" || arg == "--llmc") {
      if (i + 1 >= argc || std::string(argv[i + 1]).empty())
        return usage(arg + " needs a value");
      (arg == "--hf" ? hf : llmc) = argv[++i];
      continue;
    }
    if (!arg.empty() && arg[0] == '-')
      return usage("unknown option '" + arg + "'");
    positional.push_back(arg);
  }
  if (positional.size() != 2)
    return usage("give the executable and one input (gpt-convert STEP.fb INPUT --hf DIR)");
  if (hf.empty() == llmc.empty())
    return usage("give one of --hf DIR and --llmc FILE");
  if (bf16 && llmc.empty())
    return usage("--bf16 applies to --llmc only");
  const std::string &exePath = positional[0], &input = positional[1];

  // Every file the output may replace against every file the input is.
  std::vector<std::string> outputs =
      hf.empty() ? std::vector<std::string>{llmc}
                 : std::vector<std::string>{hf + "/model.safetensors", hf + "/config.json"};
  for (const std::string &out : outputs)
    for (const std::string &in : {input, input + "/model.safetensors", input + "/config.json",
                                  exePath})
      if (sameFile(out, in))
        return fail(out + " is the input " + in + ": write the conversion elsewhere");

  StatusOr<Executable> exe = Executable::loadFile(exePath);
  if (!exe)
    return fail(exe.status().message());
  StatusOr<gpt2::Config> config = gpt2::configOf(exe->get());
  if (!config)
    return fail(exePath + ": " + config.status().message());
  StatusOr<gpt2::Weights> weights = gpt2::importWeights(input, *config);
  if (!weights)
    return fail(weights.status().message());
  Status s = hf.empty() ? gpt2::exportLlmc(llmc, *weights, *config, bf16)
                        : gpt2::exportHuggingFace(hf, *weights, *config);
  if (!s)
    return fail(s.message());
  std::printf("gpt-convert: %s -> %s (%s)\n", input.c_str(), hf.empty() ? llmc.c_str() : hf.c_str(),
              config->describe().c_str());
  return 0;
}

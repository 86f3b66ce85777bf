//===- gptplot.cpp - draw gptrun's loss curves as SVG ---------------------===//
//
//   gptplot run1/log.jsonl -o run1/loss.svg --title "mini on Austen"
//
// Exit status: 0 on success, 1 when the log cannot be read or has nothing
// to plot, 2 for a usage error.
//
//===----------------------------------------------------------------------===//

#include "runtime/data/FileIO.h"
#include "tools/gptplot/Plot.h"

#include "runtime/support/Version.h"

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

namespace {

const char *kHelp = R"(gptplot: draw the train and val loss of a gptrun log as an SVG

usage: gptplot LOG.jsonl -o OUT.svg [options]

LOG.jsonl is the log.jsonl that `gptrun --log-dir DIR` writes. The train
loss is drawn per step, the val loss per validation (marked). A step logged
twice (a run resumed from an earlier checkpoint) keeps its last record.

options:
  -o, --output FILE   the SVG to write (required)
  --title TEXT        the plot's title (default: the log's path)
  --width N           pixels (default 800)
  --height N          pixels (default 450)
  -h, --help          this text
  --version           the version

examples:
  gptrun mini.fb --data data/austen_train.bin --val data/austen_val.bin \
         --val-every 10 --steps 100 --log-dir run1
  gptplot run1/log.jsonl -o run1/loss.svg --title "mini on Austen"

exit status: 0 on success, 1 when the log cannot be read or holds nothing to
plot, 2 for a usage error.
)";

int usage(const std::string &message) {
  std::fprintf(stderr, "gptplot: %s (see gptplot --help)\n", message.c_str());
  return 2;
}

} // namespace

int main(int argc, char **argv) {
  using namespace gptc;
  std::vector<std::string> args(argv + 1, argv + argc);
  std::string input, output;
  gptplot::PlotOptions options;
  bool titled = false;
  for (size_t i = 0; i < args.size(); ++i) {
    std::string arg = args[i], value;
    if (arg == "-h" || arg == "--help") {
      std::fputs(kHelp, stdout);
      return 0;
    }
    if (arg == "--version") {
      std::printf("gptplot %s\n", gptc::versionString());
      return 0;
    }
    if (arg.empty() || arg[0] != '-') {
      if (!input.empty())
        return usage("one log only, got '" + input + "' and '" + arg + "'");
      input = arg;
      continue;
    }
    std::string flag = arg;
    bool inlineValue = false;
    if (size_t eq = arg.find('='); eq != std::string::npos && arg.rfind("--", 0) == 0) {
      flag = arg.substr(0, eq);
      value = arg.substr(eq + 1);
      inlineValue = true;
    }
    if (flag != "-o" && flag != "--output" && flag != "--title" && flag != "--width" &&
        flag != "--height")
      return usage("unknown option '" + flag + "'");
    if (!inlineValue) {
      if (i + 1 >= args.size())
        return usage(flag + " needs a value");
      value = args[++i];
    }
    if (flag == "-o" || flag == "--output") {
      output = value;
    } else if (flag == "--title") {
      options.title = value;
      titled = true;
    } else {
      char *end = nullptr;
      long v = std::strtol(value.c_str(), &end, 10);
      if (value.empty() || *end || v < 100 || v > 20000)
        return usage(flag + " wants pixels in 100..20000, got '" + value + "'");
      (flag == "--width" ? options.width : options.height) = int(v);
    }
  }
  if (input.empty())
    return usage("no log given (gptplot LOG.jsonl -o OUT.svg)");
  if (output.empty())
    return usage("-o OUT.svg is required");
  if (!titled)
    options.title = input;
  // `gptplot log.jsonl -o log.jsonl` would replace the log with the plot.
  std::error_code ec;
  if (std::filesystem::equivalent(input, output, ec))
    return usage("-o " + output + " is the log itself; give another file");

  // A gptrun log is ~150 bytes a step: 1 GiB is millions of steps, and a
  // pipe that never ends (or /dev/zero) stops there.
  StatusOr<std::string> text = data::readFile(input, uint64_t(1) << 30);
  if (!text) {
    std::fprintf(stderr, "gptplot: error: %s\n", text.status().message().c_str());
    return 1;
  }
  StatusOr<gptplot::Curves> curves = gptplot::parseLog(*text, input);
  if (!curves) {
    std::fprintf(stderr, "gptplot: error: %s\n", curves.status().message().c_str());
    return 1;
  }
  for (const std::string &note : curves->skipped)
    std::fprintf(stderr, "gptplot: warning: %s\n", note.c_str());
  StatusOr<std::string> svg = gptplot::renderSvg(*curves, options);
  if (!svg) {
    std::fprintf(stderr, "gptplot: error: %s: %s\n", input.c_str(), svg.status().message().c_str());
    return 1;
  }
  if (Status s = data::writeFile(output, *svg); !s) {
    std::fprintf(stderr, "gptplot: error: %s\n", s.message().c_str());
    return 1;
  }
  std::printf("gptplot: %s: %zu train and %zu val points", output.c_str(), curves->train.size(),
              curves->val.size());
  if (!curves->earlier.empty())
    std::printf(" (and %zu earlier run%s of the log, dashed)", curves->earlier.size(),
                curves->earlier.size() == 1 ? "" : "s");
  std::printf("\n");
  return 0;
}

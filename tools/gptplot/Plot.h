//===- Plot.h - loss curves from gptrun's JSONL log as SVG ----------------===//
//
// Reads the "train" and "val" records of log.jsonl (see
// tools/gptrun/RunLog.h) and draws both losses against the step: axes with
// ticks, a polyline per curve (one point per step, validation points also
// marked), a legend and a title. Plain SVG 1.1, no scripts or fonts needed.
//
//===----------------------------------------------------------------------===//

#ifndef GPTC_TOOLS_GPTPLOT_PLOT_H
#define GPTC_TOOLS_GPTPLOT_PLOT_H

#include "runtime/support/Status.h"

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace gptc::gptplot {

/// Loss by step. A step logged twice (a run resumed from an earlier
/// checkpoint) keeps its last record, the one the resumed run wrote.
struct Curves {
  /// The log's last run: records after its last fresh "run_start" (one
  /// that resumed continues the run before it).
  std::map<int64_t, double> train, val;
  /// The runs before it in the same log, oldest first: drawn apart.
  struct Run {
    std::map<int64_t, double> train, val;
  };
  std::vector<Run> earlier;
  /// "LOG:N: ..." for each torn record skipped (a run killed mid-line).
  std::vector<std::string> skipped;
};

/// Parses log.jsonl's text; errors name `origin` and the line.
StatusOr<Curves> parseLog(std::string_view text, const std::string &origin);

struct PlotOptions {
  std::string title = "loss";
  int width = 800, height = 450;
};

/// The SVG document; fails when there is nothing to draw.
StatusOr<std::string> renderSvg(const Curves &curves, const PlotOptions &options);

} // namespace gptc::gptplot

#endif // GPTC_TOOLS_GPTPLOT_PLOT_H

//===- Plot.cpp - loss curves from gptrun's JSONL log as SVG --------------===//

#include "tools/gptplot/Plot.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <tuple>
#include <vector>

namespace gptc::gptplot {

namespace {

/// One flat JSON object of strings and numbers, as RunLog writes them.
class LineParser {
public:
  explicit LineParser(std::string_view s) : s(s) {}

  /// Fills `strings` and `numbers`; returns "" or what is wrong.
  std::string parse(std::map<std::string, std::string> &strings,
                    std::map<std::string, double> &numbers) {
    skip();
    if (!eat('{'))
      return "expected '{'";
    skip();
    if (eat('}'))
      return end();
    while (true) {
      std::string key;
      if (std::string e = string(key); !e.empty())
        return e;
      skip();
      if (!eat(':'))
        return "expected ':' after \"" + key + "\"";
      skip();
      if (i < s.size() && s[i] == '"') {
        std::string value;
        if (std::string e = string(value); !e.empty())
          return e;
        strings[key] = value;
      } else {
        size_t start = i;
        while (i < s.size() && std::string_view("+-.0123456789eEaINnfity").find(s[i]) !=
                                   std::string_view::npos)
          ++i;
        std::string text(s.substr(start, i - start));
        char *endp = nullptr;
        double v = std::strtod(text.c_str(), &endp);
        if (text.empty() || *endp)
          return "value of \"" + key + "\" is not a number or a string";
        numbers[key] = v;
      }
      skip();
      if (eat('}'))
        return end();
      if (!eat(','))
        return "expected ',' or '}'";
      skip();
    }
  }

private:
  std::string end() {
    skip();
    return i == s.size() ? "" : "trailing characters after '}'";
  }
  std::string string(std::string &out) {
    if (!eat('"'))
      return "expected a string";
    while (i < s.size() && s[i] != '"') {
      if (s[i] == '\\')
        return "escapes are not expected in a gptrun log";
      out += s[i++];
    }
    return eat('"') ? "" : "unterminated string";
  }
  bool eat(char c) {
    if (i < s.size() && s[i] == c) {
      ++i;
      return true;
    }
    return false;
  }
  void skip() {
    while (i < s.size() && (s[i] == ' ' || s[i] == '\t' || s[i] == '\r'))
      ++i;
  }
  std::string_view s;
  size_t i = 0;
};

std::string fmt(const char *f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), f, v);
  return buf;
}

/// 1, 2 or 5 times a power of ten, giving about `count` ticks over span.
double niceStep(double span, int count) {
  double raw = span / count, mag = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (raw <= m * mag)
      return m * mag;
  return 10 * mag;
}

std::string escape(const std::string &s) {
  std::string out;
  for (char c : s)
    out += c == '<' ? "&lt;" : c == '>' ? "&gt;" : c == '&' ? "&amp;" : std::string(1, c);
  return out;
}

} // namespace

StatusOr<Curves> parseLog(std::string_view text, const std::string &origin) {
  Curves c;
  size_t lineNo = 0;
  while (!text.empty()) {
    size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
    ++lineNo;
    if (line.find_first_not_of(" \t\r") == std::string_view::npos)
      continue;
    std::map<std::string, std::string> strings;
    std::map<std::string, double> numbers;
    auto bad = [&](const std::string &why) {
      return Status::error(origin + ":" + std::to_string(lineNo) + ": " + why);
    };
    if (std::string e = LineParser(line).parse(strings, numbers); !e.empty()) {
      // A run killed mid-record leaves a torn line: the last one (no
      // newline yet), or, from gptrun before it repaired its log, one the
      // next run's first record was glued to. Skip the torn part.
      size_t glued = line.rfind("{\"kind\"");
      bool last = text.empty() && nl == std::string_view::npos;
      if (glued != 0 && glued != std::string_view::npos) {
        strings.clear();
        numbers.clear();
        if (!LineParser(line.substr(glued)).parse(strings, numbers).empty())
          return bad(e);
        c.skipped.push_back(origin + ":" + std::to_string(lineNo) + ": skipped a torn record (" +
                            std::to_string(glued) + " bytes) glued to the next");
      } else if (last) {
        c.skipped.push_back(origin + ":" + std::to_string(lineNo) +
                            ": skipped a torn last record (" + e + ")");
        continue;
      } else {
        return bad(e);
      }
    }
    auto kind = strings.find("kind");
    if (kind == strings.end())
      return bad("record without \"kind\"");
    // A fresh run's records start a curve of their own.
    if (kind->second == "run_start") {
      if (numbers["resumed"] == 0 && (!c.train.empty() || !c.val.empty())) {
        c.earlier.push_back({std::move(c.train), std::move(c.val)});
        c.train.clear();
        c.val.clear();
      }
      continue;
    }
    if (!numbers.count("step") || !numbers.count("loss"))
      return bad("record without \"step\" and \"loss\"");
    // A whole number a double holds exactly (casting anything else is
    // undefined, and a negative step would be drawn outside the axes).
    double stepValue = numbers["step"];
    if (!(stepValue >= 0 && stepValue <= 9007199254740992.0) || stepValue != std::floor(stepValue))
      return bad("\"step\" must be a whole number from 0 to 2^53");
    int64_t step = int64_t(stepValue);
    double loss = numbers["loss"];
    if (kind->second == "train")
      c.train[step] = loss;
    else if (kind->second == "val")
      c.val[step] = loss;
    else
      return bad("unknown kind \"" + kind->second + "\"");
  }
  return c;
}

StatusOr<std::string> renderSvg(const Curves &curves, const PlotOptions &o) {
  if (curves.train.empty() && curves.val.empty() && curves.earlier.empty())
    return Status::error("no train or val records to plot");
  if (o.width < 200 || o.height < 150)
    return Status::error("the plot must be at least 200x150");
  // Non-finite losses (a diverged run) are left out of the scale and the
  // lines; the curve breaks there.
  double lo = INFINITY, hi = -INFINITY;
  int64_t maxStep = 1;
  std::vector<const std::map<int64_t, double> *> all = {&curves.train, &curves.val};
  for (const Curves::Run &run : curves.earlier)
    all.insert(all.end(), {&run.train, &run.val});
  for (const auto *m : all)
    for (auto [step, loss] : *m) {
      maxStep = std::max(maxStep, step);
      if (std::isfinite(loss)) {
        lo = std::min(lo, loss);
        hi = std::max(hi, loss);
      }
    }
  if (!std::isfinite(lo))
    return Status::error("every loss is NaN or infinite");
  if (!std::isfinite(hi - lo) || std::fabs(lo) > 1e300 || std::fabs(hi) > 1e300)
    return Status::error("losses from " + fmt("%g", lo) + " to " + fmt("%g", hi) +
                         " are beyond what the axis can scale");
  // A flat curve gets a band around it, wider than the losses' rounding.
  if (hi - lo < 1e-6 * std::max({1.0, std::fabs(lo), std::fabs(hi)})) {
    double pad = std::max(0.5, 1e-3 * std::fabs(hi));
    lo -= pad;
    hi += pad;
  }
  double yStep = niceStep(hi - lo, 5);
  lo = std::floor(lo / yStep) * yStep;
  hi = std::ceil(hi / yStep) * yStep;
  double xStep = niceStep(double(maxStep), 6);
  double xMax = std::ceil(double(maxStep) / xStep) * xStep;
  // Ticks by index, not by adding the step: at 1e20 a step below the
  // doubles' spacing would never move a running sum.
  int yTicks = int(std::lround((hi - lo) / yStep)), xTicks = int(std::lround(xMax / xStep));

  const double left = 70, right = 20, top = 40, bottom = 50;
  const double pw = o.width - left - right, ph = o.height - top - bottom;
  auto X = [&](double step) { return left + pw * step / xMax; };
  auto Y = [&](double loss) { return top + ph * (hi - loss) / (hi - lo); };

  std::string svg = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  svg += "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + std::to_string(o.width) +
         "\" height=\"" + std::to_string(o.height) + "\" viewBox=\"0 0 " +
         std::to_string(o.width) + " " + std::to_string(o.height) +
         "\" font-family=\"sans-serif\" font-size=\"12\">\n";
  svg += "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  svg += "<text x=\"" + fmt("%.1f", left + pw / 2) + "\" y=\"24\" text-anchor=\"middle\" "
         "font-size=\"16\">" + escape(o.title) + "</text>\n";
  // Grid, ticks and labels.
  for (int k = 0; k <= yTicks; ++k) {
    double y = lo + k * yStep;
    std::string py = fmt("%.1f", Y(y));
    svg += "<line x1=\"" + fmt("%.1f", left) + "\" y1=\"" + py + "\" x2=\"" +
           fmt("%.1f", left + pw) + "\" y2=\"" + py + "\" stroke=\"#e0e0e0\"/>\n";
    svg += "<text x=\"" + fmt("%.1f", left - 6) + "\" y=\"" + py +
           "\" text-anchor=\"end\" dominant-baseline=\"middle\">" + fmt("%g", y) + "</text>\n";
  }
  for (int k = 0; k <= xTicks; ++k) {
    double x = k * xStep;
    std::string px = fmt("%.1f", X(x));
    svg += "<line x1=\"" + px + "\" y1=\"" + fmt("%.1f", top) + "\" x2=\"" + px + "\" y2=\"" +
           fmt("%.1f", top + ph) + "\" stroke=\"#e0e0e0\"/>\n";
    svg += "<text x=\"" + px + "\" y=\"" + fmt("%.1f", top + ph + 16) +
           "\" text-anchor=\"middle\">" + fmt("%g", x) + "</text>\n";
  }
  svg += "<rect x=\"" + fmt("%.1f", left) + "\" y=\"" + fmt("%.1f", top) + "\" width=\"" +
         fmt("%.1f", pw) + "\" height=\"" + fmt("%.1f", ph) +
         "\" fill=\"none\" stroke=\"black\"/>\n";
  svg += "<text x=\"" + fmt("%.1f", left + pw / 2) + "\" y=\"" + fmt("%.1f", top + ph + 36) +
         "\" text-anchor=\"middle\">step</text>\n";
  svg += "<text transform=\"translate(18 " + fmt("%.1f", top + ph / 2) +
         ") rotate(-90)\" text-anchor=\"middle\">loss</text>\n";

  // One polyline per run of finite points.
  auto curve = [&](const std::map<int64_t, double> &m, const std::string &name,
                   const char *color, bool markers, const char *dash = nullptr) {
    std::string points;
    auto flush = [&] {
      if (!points.empty())
        svg += "<polyline class=\"" + std::string(name) + "\" fill=\"none\" stroke=\"" + color +
               "\" stroke-width=\"1.5\"" +
               (dash ? std::string(" stroke-dasharray=\"") + dash + "\"" : std::string()) +
               " points=\"" + points + "\"/>\n";
      points.clear();
    };
    for (auto [step, loss] : m) {
      if (!std::isfinite(loss)) {
        flush();
        continue;
      }
      points += (points.empty() ? "" : " ") + fmt("%.1f", X(double(step))) + "," +
                fmt("%.1f", Y(loss));
      if (markers)
        svg += "<circle class=\"" + std::string(name) + "-point\" cx=\"" +
               fmt("%.1f", X(double(step))) + "\" cy=\"" + fmt("%.1f", Y(loss)) +
               "\" r=\"3\" fill=\"" + color + "\"/>\n";
    }
    flush();
  };
  // Earlier runs of the log, dashed and grey, under the last one.
  for (size_t r = 0; r < curves.earlier.size(); ++r) {
    curve(curves.earlier[r].train, "earlier-train", "#9e9e9e", false, "4 3");
    curve(curves.earlier[r].val, "earlier-val", "#bdbdbd", true, "4 3");
  }
  curve(curves.train, "train", "#1f77b4", false);
  curve(curves.val, "val", "#ff7f0e", true);

  // Legend, top right.
  double lx = left + pw - 170, ly = top + 10;
  int row = 0;
  size_t earlierPoints = 0;
  for (const Curves::Run &run : curves.earlier)
    earlierPoints += run.train.size() + run.val.size();
  std::string earlierName = std::to_string(curves.earlier.size()) + " earlier run" +
                            (curves.earlier.size() == 1 ? "" : "s");
  for (auto [name, color, n] :
       {std::tuple<const char *, const char *, size_t>{"train", "#1f77b4", curves.train.size()},
        {"val", "#ff7f0e", curves.val.size()},
        {earlierName.c_str(), "#9e9e9e", earlierPoints}}) {
    if (!n)
      continue;
    double y = ly + 18 * row++;
    svg += "<line x1=\"" + fmt("%.1f", lx) + "\" y1=\"" + fmt("%.1f", y) + "\" x2=\"" +
           fmt("%.1f", lx + 24) + "\" y2=\"" + fmt("%.1f", y) + "\" stroke=\"" + color +
           "\" stroke-width=\"2\"/>\n";
    svg += "<text x=\"" + fmt("%.1f", lx + 30) + "\" y=\"" + fmt("%.1f", y) +
           "\" dominant-baseline=\"middle\">" + name + " (" + std::to_string(n) +
           " points)</text>\n";
  }
  svg += "</svg>\n";
  return svg;
}

} // namespace gptc::gptplot

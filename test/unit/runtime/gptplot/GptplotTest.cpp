//===- GptplotTest.cpp - the log parser, the SVG and the gptplot tool -----===//

#include "test/unit/runtime/RunTool.h"
#include "tools/gptplot/Plot.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <unistd.h>

using namespace gptc;
using namespace gptc::gptplot;
using namespace gptc::testing;

namespace {

namespace fs = std::filesystem;

/// A log as gptrun writes it: `steps` train records (loss 10 - step/10),
/// val every 5 steps, and step 3 logged again by a resumed run.
std::string sampleLog(int steps) {
  std::string log;
  for (int s = 1; s <= steps; ++s) {
    log += "{\"kind\":\"train\",\"step\":" + std::to_string(s) + ",\"loss\":" +
           std::to_string(10 - s / 10.0) +
           ",\"grad_norm\":1.5,\"lr\":0.0003,\"ms\":12.5,\"tok_per_s\":53120}\n";
    if (s % 5 == 0)
      log += "{\"kind\":\"val\",\"step\":" + std::to_string(s) + ",\"loss\":" +
             std::to_string(10.5 - s / 10.0) + ",\"ms\":2}\n";
  }
  log += "{\"kind\":\"train\",\"step\":3,\"loss\":9.5,\"grad_norm\":1,\"lr\":0.0003,\"ms\":1,"
         "\"tok_per_s\":1}\n";
  return log;
}

/// The points of the polyline of class `name`, as (x, y) pairs.
std::vector<std::pair<double, double>> points(const std::string &svg, const std::string &name) {
  std::smatch m;
  std::vector<std::pair<double, double>> out;
  if (!std::regex_search(svg, m, std::regex("<polyline class=\"" + name + "\"[^>]* points=\"([^\"]*)\"")))
    return out;
  std::istringstream in(m[1].str());
  double x, y;
  char comma;
  while (in >> x >> comma >> y)
    out.emplace_back(x, y);
  return out;
}

// Verify parsing: train and val by step, a repeated step keeps its last
// record, and malformed lines name the file and line.
TEST(GptplotTest, ParsesTheLog) {
  auto c = parseLog(sampleLog(20), "log.jsonl");
  ASSERT_TRUE(c) << c.status().message();
  EXPECT_EQ(c->train.size(), 20u);
  EXPECT_EQ(c->val.size(), 4u);
  EXPECT_DOUBLE_EQ(c->train.at(3), 9.5);
  EXPECT_DOUBLE_EQ(c->val.at(20), 8.5);

  auto bad = parseLog("{\"kind\":\"train\",\"step\":1,\"loss\":2}\n{\"kind\":\"train\",\"step\":2,"
                      "\"loss\":oops}\n",
                      "log.jsonl");
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.status().message(), "log.jsonl:2: value of \"loss\" is not a number or a string");
  bad = parseLog("{\"kind\":\"test\",\"step\":1,\"loss\":2}", "l");
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.status().message(), "l:1: unknown kind \"test\"");
  bad = parseLog("{\"kind\":\"val\",\"step\":1}", "l");
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.status().message(), "l:1: record without \"step\" and \"loss\"");
  for (const char *step : {"-1", "2.5", "nan", "1e300"}) {
    bad = parseLog(std::string("{\"kind\":\"train\",\"step\":") + step + ",\"loss\":2}", "l");
    ASSERT_FALSE(bad) << step;
    EXPECT_EQ(bad.status().message(), "l:1: \"step\" must be a whole number from 0 to 2^53");
  }
}

// Verify that a fresh run's "run_start" starts a new curve (a resumed
// one's continues it), and that a torn record of a killed run, last or
// glued to the next record by a gptrun before the repair, is skipped with
// a note instead of refusing the whole log.
TEST(GptplotTest, SeparatesRunsAndSkipsTornRecords) {
  std::string log = "{\"kind\":\"run_start\",\"resumed\":0}\n"
                    "{\"kind\":\"train\",\"step\":1,\"loss\":5}\n"
                    "{\"kind\":\"train\",\"step\":2,\"lo{\"kind\":\"run_start\",\"resumed\":0}\n"
                    "{\"kind\":\"train\",\"step\":1,\"loss\":7}\n"
                    "{\"kind\":\"run_start\",\"resumed\":1}\n"
                    "{\"kind\":\"train\",\"step\":2,\"loss\":6}\n"
                    "{\"kind\":\"train\",\"step\":3,\"lo";
  auto c = parseLog(log, "log.jsonl");
  ASSERT_TRUE(c) << c.status().message();
  ASSERT_EQ(c->earlier.size(), 1u);
  EXPECT_EQ(c->earlier[0].train, (std::map<int64_t, double>{{1, 5}}));
  EXPECT_EQ(c->train, (std::map<int64_t, double>{{1, 7}, {2, 6}}));
  EXPECT_EQ(c->skipped, (std::vector<std::string>{
                            "log.jsonl:3: skipped a torn record (28 bytes) glued to the next",
                            "log.jsonl:7: skipped a torn last record (unterminated string)"}));
  auto svg = renderSvg(*c, PlotOptions());
  ASSERT_TRUE(svg) << svg.status().message();
  EXPECT_NE(svg->find("class=\"earlier-train\""), std::string::npos);
  EXPECT_NE(svg->find("1 earlier run (1 points)"), std::string::npos);
}

/// Every number in the SVG's coordinates and labels is finite.
void expectFinite(const std::string &svg) {
  std::regex number("(x|y|x1|x2|y1|y2|cx|cy)=\"([^\"]*)\"");
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), number); it != std::sregex_iterator();
       ++it)
    EXPECT_TRUE(std::isfinite(std::strtod((*it)[2].str().c_str(), nullptr))) << (*it)[0];
  EXPECT_FALSE(std::regex_search(svg, std::regex(">-?(nan|inf)<"))) << "a tick label";
}

// Verify losses far from 1 (a diverged run): one point at 1e20, two that
// differ by less than a tick at that scale (this looped forever, adding a
// step below the doubles' spacing), and a span too wide to scale.
TEST(GptplotTest, ScalesHugeAndFlatLosses) {
  Curves one;
  one.train[1] = 1e20;
  auto svg = renderSvg(one, PlotOptions{});
  ASSERT_TRUE(svg) << svg.status().message();
  expectFinite(*svg);
  ASSERT_EQ(points(*svg, "train").size(), 1u);

  Curves close;
  close.train[1] = 1e20;
  close.train[2] = 100000000000000016384.0;
  svg = renderSvg(close, PlotOptions{});
  ASSERT_TRUE(svg) << svg.status().message();
  expectFinite(*svg);
  EXPECT_LT(svg->size(), 20000u);

  Curves wide;
  wide.train[1] = -1e308;
  wide.train[2] = 1e308;
  svg = renderSvg(wide, PlotOptions{});
  ASSERT_FALSE(svg);
  EXPECT_EQ(svg.status().message(), "losses from -1e+308 to 1e+308 are beyond what the axis can scale");
}

// Verify the SVG: a polyline per curve with one point per step, going down
// as the loss does, inside the plot; val points marked; NaN breaks a line.
TEST(GptplotTest, DrawsBothCurves) {
  auto c = parseLog(sampleLog(20), "log.jsonl");
  ASSERT_TRUE(c);
  auto svg = renderSvg(*c, PlotOptions{"mini <test>", 800, 450});
  ASSERT_TRUE(svg) << svg.status().message();
  EXPECT_EQ(svg->rfind("<?xml", 0), 0u);
  EXPECT_NE(svg->find("mini &lt;test&gt;"), std::string::npos);
  auto train = points(*svg, "train"), val = points(*svg, "val");
  ASSERT_EQ(train.size(), 20u) << *svg;
  ASSERT_EQ(val.size(), 4u);
  for (size_t i = 1; i < train.size(); ++i)
    EXPECT_GT(train[i].first, train[i - 1].first);
  EXPECT_GT(train.back().second, train[3].second) << "lower loss is higher up: larger y";
  for (auto [x, y] : train) {
    EXPECT_GE(x, 70);
    EXPECT_LE(x, 780);
    EXPECT_GE(y, 40);
    EXPECT_LE(y, 400);
  }
  std::regex marker("val-point");
  EXPECT_EQ(std::distance(std::sregex_iterator(svg->begin(), svg->end(), marker),
                          std::sregex_iterator()),
            4);

  c->train[10] = NAN;
  svg = renderSvg(*c, PlotOptions{});
  ASSERT_TRUE(svg);
  EXPECT_EQ(points(*svg, "train").size(), 9u) << "the first run, up to the NaN";

  EXPECT_FALSE(renderSvg(Curves{}, PlotOptions{}));
}

// Verify the tool: writes a non-empty SVG with the log's points, and fails
// clearly on a missing log or a missing -o.
TEST(GptplotTest, ToolWritesTheSvg) {
  fs::path dir = fs::temp_directory_path() / ("gptplot-test-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::string log = (dir / "log.jsonl").string(), out = (dir / "loss.svg").string();
  std::ofstream(log) << sampleLog(12);
  ToolResult r = runTool(GPTC_GPTPLOT, log + " -o " + out + " --title run1");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(r.output, "gptplot: " + out + ": 12 train and 2 val points\n");
  std::ifstream in(out);
  std::string svg((std::istreambuf_iterator<char>(in)), {});
  ASSERT_FALSE(svg.empty());
  EXPECT_EQ(points(svg, "train").size(), 12u);
  EXPECT_EQ(points(svg, "val").size(), 2u);

  r = runTool(GPTC_GPTPLOT, (dir / "missing.jsonl").string() + " -o " + out);
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.output.find("gptplot: error: " + (dir / "missing.jsonl").string()), std::string::npos)
      << r.output;
  r = runTool(GPTC_GPTPLOT, log);
  EXPECT_EQ(r.status, 2);
  EXPECT_EQ(r.output, "gptplot: -o OUT.svg is required (see gptplot --help)\n");
  // -o naming the log (here through another spelling of its path).
  std::string same = (dir / "." / "log.jsonl").string();
  r = runTool(GPTC_GPTPLOT, log + " -o " + same);
  EXPECT_EQ(r.status, 2);
  EXPECT_EQ(r.output, "gptplot: -o " + same + " is the log itself; give another file (see gptplot --help)\n");
  // An endless input is refused before it is read.
  r = runTool(GPTC_GPTPLOT, "/dev/zero -o " + out);
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.output, "gptplot: error: /dev/zero: is a device, not a file\n");
  std::ifstream again(log);
  EXPECT_EQ(std::string((std::istreambuf_iterator<char>(again)), {}), sampleLog(12));
  fs::remove_all(dir);
}

} // namespace

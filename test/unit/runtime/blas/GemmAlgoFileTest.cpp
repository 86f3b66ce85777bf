//===- GemmAlgoFileTest.cpp - gptrun --gemm-algos's file ------------------===//

#include "runtime/blas/GemmAlgoFile.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <unistd.h>

using namespace gptc;
using namespace gptc::blas;

namespace {

GemmAlgoFile sample() {
  GemmAlgoFile f;
  f.cublasLt = "130100";
  f.device = "NVIDIA H100 80GB HBM3 (sm_90)";
  f.algos["256,256,256,1,1,0,256,256,256,0,0,0,3,3,3,0,0,0,-1,256,1.000000"] = {
      0x0123456789abcdefull, 0, 1, 2, 3, 4, 5, ~0ull};
  f.algos["64,48,32,1,1,0,32,32,64,0,0,0,5,5,3,0,5,1,5,256,1.000000"] = {9, 8, 7, 6, 5, 4, 3, 2};
  return f;
}

std::string parseError(const std::string &text) {
  StatusOr<GemmAlgoFile> f = parseGemmAlgos(text, "algos.txt");
  return f ? "" : f.status().message();
}

const char *kHeader = "gptc-gemm-algos 1\ncublaslt 130100\ndevice GPU (sm_90)\n";
const char *kWords = " 0000000000000001 0000000000000002 0000000000000003 0000000000000004"
                     " 0000000000000005 0000000000000006 0000000000000007 0000000000000008";

} // namespace

// Verify that the text parses back to the same versions, device and words.
TEST(GemmAlgoFileTest, RoundTrips) {
  GemmAlgoFile f = sample();
  std::string text = formatGemmAlgos(f);
  EXPECT_EQ(text.substr(0, text.find('\n')), "gptc-gemm-algos 1");
  StatusOr<GemmAlgoFile> back = parseGemmAlgos(text, "algos.txt");
  ASSERT_TRUE(back) << back.status().message();
  EXPECT_EQ(back->cublasLt, f.cublasLt);
  EXPECT_EQ(back->device, f.device);
  EXPECT_EQ(back->algos, f.algos);
}

// Verify that each malformed line is an error naming the file and line.
TEST(GemmAlgoFileTest, RefusesMalformedText) {
  EXPECT_EQ(parseError(""),
            "algos.txt:1: not a GEMM algorithm file (its first line is not 'gptc-gemm-algos 1')");
  EXPECT_EQ(parseError("gptc-gemm-algos 2\n"),
            "algos.txt:1: not a GEMM algorithm file (its first line is not 'gptc-gemm-algos 1')");
  EXPECT_EQ(parseError("gptc-gemm-algos 1\ndevice x\n"),
            "algos.txt:2: expected 'cublaslt <value>'");
  EXPECT_EQ(parseError("gptc-gemm-algos 1\ncublaslt 1\ndevice \n"),
            "algos.txt:3: expected 'device <value>'");
  std::string h = kHeader;
  EXPECT_EQ(parseError(h + "gemm k" + kWords + "\n"),
            "algos.txt:4: expected 'algo <key> <8 words>'");
  EXPECT_EQ(parseError(h + "algo k 0000000000000001\n"),
            "algos.txt:4: an algorithm is 8 words of 16 lowercase hex digits");
  EXPECT_EQ(parseError(h + "algo k" + std::string(kWords).replace(1, 1, "g") + "\n"),
            "algos.txt:4: an algorithm is 8 words of 16 lowercase hex digits");
  EXPECT_EQ(parseError(h + "algo k" + kWords + " 0000000000000009\n"),
            "algos.txt:4: more than 8 words after 'k'");
  EXPECT_EQ(parseError(h + "algo k" + kWords + "\n\nalgo k" + kWords + "\n"),
            "algos.txt:6: a second algorithm for 'k'");
  EXPECT_EQ(parseError(h + "algo k" + kWords + "\n"), "");
}

// Verify that a file of another cuBLASLt or GPU is refused, naming both.
TEST(GemmAlgoFileTest, MatchesOnlyItsCublasLtAndDevice) {
  GemmAlgoFile f = sample();
  EXPECT_TRUE(checkGemmAlgosMatch(f, "a.txt", f.cublasLt, f.device));
  Status other = checkGemmAlgosMatch(f, "a.txt", "130200", f.device);
  ASSERT_FALSE(other);
  EXPECT_EQ(other.message(), "a.txt: its algorithms were chosen by cuBLASLt 130100 on NVIDIA "
                             "H100 80GB HBM3 (sm_90), this run has cuBLASLt 130200 on NVIDIA "
                             "H100 80GB HBM3 (sm_90); remove the file to choose again");
  EXPECT_FALSE(checkGemmAlgosMatch(f, "a.txt", f.cublasLt, "NVIDIA H200 (sm_90)"));
}

// Verify the file on disk: written whole (no temporary left), read back,
// and a missing or unwritable path is an error naming it.
TEST(GemmAlgoFileTest, WritesAndReadsTheFile) {
  namespace fs = std::filesystem;
  fs::path dir = fs::temp_directory_path() / ("gptc-algos-" + std::to_string(getpid()));
  fs::create_directories(dir);
  std::string path = (dir / "algos.txt").string();
  ASSERT_TRUE(writeGemmAlgos(path, sample()));
  StatusOr<GemmAlgoFile> back = readGemmAlgos(path);
  ASSERT_TRUE(back) << back.status().message();
  EXPECT_EQ(back->algos, sample().algos);
  EXPECT_EQ(std::distance(fs::directory_iterator(dir), fs::directory_iterator()), 1);
  StatusOr<GemmAlgoFile> missing = readGemmAlgos((dir / "none.txt").string());
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.status().message(), (dir / "none.txt").string() + ": No such file or directory");
  Status unwritable = writeGemmAlgos((dir / "no/such/dir/a.txt").string(), sample());
  ASSERT_FALSE(unwritable);
  EXPECT_NE(unwritable.message().find("a.txt: cannot create a temporary file"), std::string::npos)
      << unwritable.message();
  fs::remove_all(dir);
}

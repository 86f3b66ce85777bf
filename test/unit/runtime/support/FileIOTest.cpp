//===- FileIOTest.cpp - input checks and output-is-input refusal ---------===//

#include "runtime/support/FileIO.h"

#include "test/unit/ScratchDir.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <csignal>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

namespace gptc {
namespace {

namespace fs = std::filesystem;

void write(const fs::path &path, const std::string &text) { std::ofstream(path) << text; }

// Verify that sameFile sees through spellings, symlinks and hard links, and
// tells apart two files of equal contents.
TEST(FileIOTest, SameFileComparesInodes) {
  testing::ScratchDir dir("gptc-fileio");
  fs::path a = dir.path() / "a.txt", b = dir.path() / "b.txt";
  write(a, "same");
  write(b, "same");
  fs::create_symlink(a, dir.path() / "link");
  fs::create_hard_link(a, dir.path() / "hard");
  EXPECT_TRUE(sameFile(a.string(), (dir.path() / "." / "a.txt").string()));
  EXPECT_TRUE(sameFile(a.string(), (dir.path() / "link").string()));
  EXPECT_TRUE(sameFile(a.string(), (dir.path() / "hard").string()));
  EXPECT_FALSE(sameFile(a.string(), b.string()));
  EXPECT_FALSE(sameFile(a.string(), (dir.path() / "missing").string()));

  EXPECT_TRUE(checkOutputIsNotInput(b.string(), {a.string()}));
  EXPECT_TRUE(checkOutputIsNotInput((dir.path() / "new").string(), {a.string()}));
  Status s = checkOutputIsNotInput((dir.path() / "link").string(), {b.string(), a.string()});
  ASSERT_FALSE(s);
  EXPECT_NE(s.message().find("a.txt"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("destroy the input"), std::string::npos) << s.message();
}

// Verify that readFile refuses a device, a directory and a file over its
// bound before reading, and a pipe once it passes the bound.
TEST(FileIOTest, ReadFileRefusesUnboundedInputs) {
  testing::ScratchDir dir("gptc-fileio");
  StatusOr<std::string> zero = readFile("/dev/zero");
  ASSERT_FALSE(zero);
  EXPECT_NE(zero.status().message().find("/dev/zero: is a device"), std::string::npos);
  EXPECT_FALSE(readFile(dir.path().string()));

  fs::path big = dir.path() / "big";
  write(big, std::string(4096, 'x'));
  StatusOr<std::string> over = readFile(big.string(), 1024);
  ASSERT_FALSE(over);
  EXPECT_NE(over.status().message().find("over the 1024 bytes"), std::string::npos)
      << over.status().message();
  Status named = checkInputFile(big.string(), 1024, "executable");
  ASSERT_FALSE(named);
  EXPECT_EQ(named.message().rfind("executable " + big.string(), 0), 0u) << named.message();
  ASSERT_TRUE(readFile(big.string(), 4096));
  EXPECT_EQ(readFile(big.string(), 4096)->size(), 4096u);

  fs::path fifo = dir.path() / "fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  pid_t writer = ::fork();
  if (writer == 0) {
    std::ofstream out(fifo);
    std::string chunk(1 << 16, 'y');
    for (int i = 0; i < 64 && out; ++i)
      out << chunk;
    ::_exit(0);
  }
  StatusOr<std::string> piped = readFile(fifo.string(), 1 << 20);
  ASSERT_FALSE(piped);
  EXPECT_NE(piped.status().message().find("longer than"), std::string::npos);
  ::kill(writer, SIGKILL);
  ::waitpid(writer, nullptr, 0);
}

} // namespace
} // namespace gptc

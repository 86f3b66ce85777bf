//===- ScratchDir.h - a per-test temporary directory ----------------------===//

#ifndef GPTC_TEST_UNIT_SCRATCHDIR_H
#define GPTC_TEST_UNIT_SCRATCHDIR_H

#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <unistd.h>

namespace gptc::testing {

/// An empty directory under the system's temporary directory, named after
/// `prefix`, the process and the running test (so parallel test processes
/// and reruns never share one); removed with everything in it on
/// destruction. A fixture member gives every test its own.
class ScratchDir {
public:
  explicit ScratchDir(const std::string &prefix) {
    const ::testing::TestInfo *test = ::testing::UnitTest::GetInstance()->current_test_info();
    std::string name = prefix + "-" + std::to_string(::getpid());
    if (test)
      name += std::string("-") + test->name();
    path_ = std::filesystem::temp_directory_path() / name;
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  ScratchDir(const ScratchDir &) = delete;
  ScratchDir &operator=(const ScratchDir &) = delete;

  const std::filesystem::path &path() const { return path_; }

private:
  std::filesystem::path path_;
};

} // namespace gptc::testing

#endif // GPTC_TEST_UNIT_SCRATCHDIR_H

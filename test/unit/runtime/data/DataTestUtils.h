//===- DataTestUtils.h - shared helpers for the data suites ---------------===//

#ifndef GPTC_TEST_UNIT_RUNTIME_DATA_DATATESTUTILS_H
#define GPTC_TEST_UNIT_RUNTIME_DATA_DATATESTUTILS_H

#include "runtime/data/Tokenizer.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <unistd.h>

namespace gptc::data::testing {

/// GPT-2's tokenizer from GPTC_VOCAB_DIR, loaded once; null (after a test
/// failure that says how to get the files) if it cannot be loaded.
inline Tokenizer *gpt2Tokenizer() {
  static StatusOr<Tokenizer> tok = Tokenizer::load(GPTC_VOCAB_DIR);
  if (!tok) {
    ADD_FAILURE() << tok.status().message()
                  << "\n(scripts/setup.sh fetches encoder.json and vocab.bpe into "
                  << GPTC_VOCAB_DIR << ")";
    return nullptr;
  }
  return &*tok;
}

/// A path in a per-process temporary folder, removed when the process exits.
inline std::string tempPath(const std::string &name) {
  namespace fs = std::filesystem;
  struct TempDir {
    fs::path path = fs::temp_directory_path() / ("gptc-data-test-" + std::to_string(getpid()));
    TempDir() { fs::create_directories(path); }
    ~TempDir() {
      std::error_code ec;
      fs::remove_all(path, ec);
    }
  };
  static const TempDir dir;
  return (dir.path / name).string();
}

} // namespace gptc::data::testing

#endif // GPTC_TEST_UNIT_RUNTIME_DATA_DATATESTUTILS_H

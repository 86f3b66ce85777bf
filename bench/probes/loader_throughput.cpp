//===- loader_throughput.cpp - tokens/s the data loader delivers ----------===//
//
// How fast DataLoader::next (what gptrun's BatchStage calls once per
// micro-batch) fills 124M-shaped batches, B=64 and 128 at T=1024, from a
// multi-shard, memory-mapped llm.c dataset, in sequential and shuffled
// order; "warm" with the shards in the page cache, "cold" after
// posix_fadvise(DONTNEED) has dropped them (each window then comes from the
// disk). The bar is what a 124M step consumes on one H100: ~700K tokens/s
// (issue 43's figure; gptc's fastest 124M step, FP8 B=64 T=1024 in 99 ms,
// is 662K, bench/results/2026-12.md); each rank of a multi-GPU run needs the
// same from its own loader. Every id is checked against GPT-2's vocabulary
// as it is read, as in training.
//
// Build against the runtime's libraries (after /work/bin/nj gptc_data):
//   c++ -O2 -std=c++17 -I. bench/probes/loader_throughput.cpp \
//     build/runtime/data/libgptc_data.a build/runtime/support/libgptc_support.a \
//     -lz -lpthread -o /tmp/loader_throughput
//   /tmp/loader_throughput [DIR [SHARDS [TOKENS_PER_SHARD]]]
// DIR (default /tmp/loader-bench) gets SHARDS (4) shards of TOKENS_PER_SHARD
// (25M) random ids unless they are there already.
//
//===----------------------------------------------------------------------===//

#include "runtime/data/DataLoader.h"
#include "runtime/data/TokenShards.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include <fcntl.h>
#include <unistd.h>

using namespace gptc;
using namespace gptc::data;

namespace {

constexpr double kStepTokensPerSecond = 700e3; // 124M on one H100

/// Drops `path` from the page cache (clean pages only: written and synced).
void evict(const std::string &path) {
  int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0)
    return;
  ::fdatasync(fd);
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  ::close(fd);
}

} // namespace

int main(int argc, char **argv) {
  namespace fs = std::filesystem;
  std::string dir = argc > 1 ? argv[1] : "/tmp/loader-bench";
  int shards = argc > 2 ? std::atoi(argv[2]) : 4;
  uint64_t perShard = argc > 3 ? std::strtoull(argv[3], nullptr, 10) : 25000000;
  fs::create_directories(dir);
  std::vector<std::string> files;
  uint64_t state = 12345;
  for (int s = 0; s < shards; ++s) {
    std::string path = shardPath(dir + "/bench", "train", uint64_t(s) + 1);
    files.push_back(path);
    std::error_code ec;
    if (fs::exists(path, ec) && fs::file_size(path, ec) == 1024 + 2 * perShard)
      continue;
    StatusOr<std::unique_ptr<TokenFileWriter>> w = TokenFileWriter::create(path);
    if (!w) {
      std::fprintf(stderr, "%s\n", w.status().message().c_str());
      return 1;
    }
    std::vector<int32_t> chunk(1 << 20);
    for (uint64_t left = perShard; left > 0;) {
      chunk.resize(std::min<uint64_t>(left, 1 << 20));
      for (int32_t &t : chunk) {
        state = state * 6364136223846793005ull + 1442695040888963407ull;
        t = int32_t((state >> 33) % 50257);
      }
      if (Status st = (*w)->append(chunk.data(), chunk.size()); !st) {
        std::fprintf(stderr, "%s\n", st.message().c_str());
        return 1;
      }
      left -= chunk.size();
    }
    if (Status st = (*w)->commit(); !st) {
      std::fprintf(stderr, "%s\n", st.message().c_str());
      return 1;
    }
  }
  std::string spec = dir + "/bench_train_*.bin";
  std::printf("dataset: %s, %d shards x %llu tokens (%.0f MB)\n", spec.c_str(), shards,
              (unsigned long long)perShard, shards * (1024 + 2.0 * perShard) / 1e6);
  std::printf("%-5s %-5s %-10s %-5s %8s %14s %10s %9s\n", "B", "T", "order", "cache", "batches",
              "tokens/s", "ms/batch", "x 700K");
  for (int64_t b : {64, 128})
    for (bool shuffle : {false, true})
      for (bool cold : {false, true}) {
        DataLoaderOptions o;
        o.batchSize = b;
        o.seqLen = 1024;
        o.shuffle = shuffle;
        o.seed = 1337;
        StatusOr<DataLoader> loader = DataLoader::open(spec, o, 50257);
        if (!loader) {
          std::fprintf(stderr, "%s\n", loader.status().message().c_str());
          return 1;
        }
        std::vector<int32_t> inputs, targets;
        // Warm: one pass over what is timed first; cold: dropped from the cache.
        int64_t batches = std::min<int64_t>(loader->stepsPerEpoch(), cold ? 400 : 1500);
        if (cold) {
          for (const std::string &f : files)
            evict(f);
        } else {
          for (int64_t i = 0; i < batches; ++i)
            loader->next(inputs, targets);
          loader->reset();
        }
        auto start = std::chrono::steady_clock::now();
        for (int64_t i = 0; i < batches; ++i)
          loader->next(inputs, targets);
        double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        if (!loader->status()) {
          std::fprintf(stderr, "%s\n", loader->status().message().c_str());
          return 1;
        }
        double tps = double(batches) * double(b) * 1024 / s;
        std::printf("%-5lld %-5d %-10s %-5s %8lld %14.0f %10.3f %8.0fx\n", (long long)b, 1024,
                    shuffle ? "shuffled" : "sequential", cold ? "cold" : "warm",
                    (long long)batches, tps, 1e3 * s / double(batches),
                    tps / kStepTokensPerSecond);
      }
  return 0;
}

//===- host_gemm.cpp - GFLOP/s of the Host target's GEMM (cpuGemm) -------===//
//
// Times blas::cpuGemm on F32 and BF16 operands at GPT-2 shapes, for 1 thread
// and for every hardware thread. Build it against the runtime's libraries
// (after /work/bin/nj gptc_cpu_gemm):
//   c++ -O2 -std=c++17 -I. -Ibuild bench/probes/host_gemm.cpp \
//     build/runtime/blas/libgptc_cpu_gemm.a build/runtime/executable/libgptc_executable.a \
//     build/runtime/support/libgptc_support.a -lflatbuffers -lpthread -o /tmp/host_gemm
//   /tmp/host_gemm [M N K ...]
//
//===----------------------------------------------------------------------===//

#include "runtime/blas/CpuGemm.h"
#include "runtime/support/ThreadPool.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

using namespace gptc;
namespace s = gptc::schema;

namespace {

/// Median-free best of `reps` seconds per GEMM of D (m x n) = A^T (m x k) B (k x n), the
/// layout of gptc's forward linear layers (TN).
double secondsPerGemm(int64_t m, int64_t n, int64_t k, s::DType t, ThreadPool &pool, int reps) {
  flatbuffers::FlatBufferBuilder fb;
  fb.Finish(s::CreateGemm(fb, m, n, k, 1, true, false, k, k, m, 0, 0, 0, t, t, t));
  const s::Gemm *g = flatbuffers::GetRoot<s::Gemm>(fb.GetBufferPointer());
  size_t bytes = t == s::DType::F32 ? 4 : 2;
  std::vector<char> a(m * k * bytes), b(k * n * bytes), c(m * n * bytes);
  for (size_t i = 0; i < a.size(); ++i)
    a[i] = char(i * 7 % 61 + 1);
  for (size_t i = 0; i < b.size(); ++i)
    b[i] = char(i * 5 % 59 + 1);
  double best = 1e30;
  for (int r = 0; r < reps; ++r) {
    auto start = std::chrono::steady_clock::now();
    Status st = blas::cpuGemm(*g, 0, {a.data(), b.data(), c.data()}, blas::cpuIsa(), pool);
    double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (!st) {
      std::fprintf(stderr, "%s\n", st.message().c_str());
      std::exit(1);
    }
    best = std::min(best, sec);
  }
  return best;
}

} // namespace

int main(int argc, char **argv) {
  std::vector<int64_t> shapes = {768, 64, 768, 3072, 64, 768, 768, 256, 3072, 50304, 256, 64};
  if (argc > 1) {
    shapes.clear();
    for (int i = 1; i + 2 < argc + 0 && i < argc; i += 3)
      for (int j = 0; j < 3; ++j)
        shapes.push_back(std::atoll(argv[i + j]));
  }
  unsigned all = std::max(1u, std::thread::hardware_concurrency());
  std::printf("isa %d (0 generic, 1 avx2, 2 avx512), %u hardware threads\n", int(blas::cpuIsa()),
              all);
  std::printf("%7s %6s %6s %5s %8s %12s %12s\n", "m", "n", "k", "type", "threads", "ms", "GFLOP/s");
  for (size_t i = 0; i + 2 < shapes.size(); i += 3)
    for (s::DType t : {s::DType::F32, s::DType::BF16})
      for (unsigned threads : {1u, all}) {
        ThreadPool pool(threads);
        int64_t m = shapes[i], n = shapes[i + 1], k = shapes[i + 2];
        double sec = secondsPerGemm(m, n, k, t, pool, 5);
        std::printf("%7lld %6lld %6lld %5s %8u %12.3f %12.1f\n", (long long)m, (long long)n,
                    (long long)k, s::EnumNameDType(t), threads, sec * 1e3, 2.0 * m * n * k / sec / 1e9);
        if (threads == all)
          break;
      }
}

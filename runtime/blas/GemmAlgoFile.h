//===- GemmAlgoFile.h - cuBLASLt algorithm choices on disk ----------------===//
//
// gptrun --gemm-algos FILE keeps autotuning's choices (one cuBLASLt
// algorithm per GEMM descriptor) in a text file, so that later runs take
// the same algorithms, and with them the same kernels, instead of timing
// again: autotuning's speed without a choice that can differ between runs.
// A choice holds only for the cuBLASLt version and GPU that made it, so the
// file names both and a run on another refuses it.
//
//   gptc-gemm-algos 1
//   cublaslt 130100
//   device NVIDIA H100 80GB HBM3 (sm_90)
//   algo <descriptor key> <8 words of cublasLtMatmulAlgo_t, 16 hex digits each>
//
// No CUDA here: CublasLtGemm (runtime/blas) reads and writes it.
//
//===----------------------------------------------------------------------===//

#ifndef GPTC_RUNTIME_BLAS_GEMMALGOFILE_H
#define GPTC_RUNTIME_BLAS_GEMMALGOFILE_H

#include "runtime/support/Status.h"

#include <array>
#include <cstdint>
#include <map>
#include <string>

namespace gptc::blas {

struct GemmAlgoFile {
  std::string cublasLt; // cublasLtGetVersion()
  std::string device;   // the GPU's name and compute capability
  // Descriptor key (no blanks) -> the algorithm's opaque words.
  std::map<std::string, std::array<uint64_t, 8>> algos;
};

/// The file's text.
std::string formatGemmAlgos(const GemmAlgoFile &file);

/// Parses `text`; errors name `path` and the line.
StatusOr<GemmAlgoFile> parseGemmAlgos(const std::string &text, const std::string &path);

/// Reads and parses `path` (a missing file is an error).
StatusOr<GemmAlgoFile> readGemmAlgos(const std::string &path);

/// Writes `path` atomically (runtime/support/FileIO.h).
Status writeGemmAlgos(const std::string &path, const GemmAlgoFile &file);

/// An error naming `path` unless `file` was made by this cuBLASLt and GPU.
Status checkGemmAlgosMatch(const GemmAlgoFile &file, const std::string &path,
                           const std::string &cublasLt, const std::string &device);

} // namespace gptc::blas

#endif // GPTC_RUNTIME_BLAS_GEMMALGOFILE_H

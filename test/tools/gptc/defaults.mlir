// Tests gptc compile's defaults: the headline command, as written, builds
// GPT-2 124M at T=1024 in bf16 for CUDA sm_90 with the batch fitted to the
// GPU's memory, for any number of GPUs, and says so.

// RUN: rm -rf %t && mkdir -p %t && cd %t
// RUN: gptc compile %models/gpt2.mlir -o step.fb 2>&1 | FileCheck %s --check-prefix=SAY
// SAY: gptc: model 124M (default), B=128 (the largest to fit --gpu-memory=76 GiB: plans {{[0-9.]+}} GiB), T=1024, precision bf16 (default), CUDA sm_90 (default), any number of GPUs (gptrun --gpus N)
// RUN: gptc explain step.fb | FileCheck %s --check-prefix=EXPLAIN
// EXPLAIN:      target: cuda sm_90a
// EXPLAIN-LABEL: model: 124M
// EXPLAIN:        batch = 128
// EXPLAIN:        seq = 1024
// EXPLAIN:        precision: bf16; GEMM A operands: BF16
// EXPLAIN-NEXT:   data parallel: any number of ranks

// A smaller GPU gets a smaller batch; --batch wins; the host target and the
// test configs keep the preset's batch (no memory plan of a GPU decides it).
// RUN: gptc compile %models/gpt2.mlir --gpu-memory=20 --compile-to=memory-plan -o /dev/null 2>&1 | FileCheck %s --check-prefix=SMALL
// SMALL: gptc: model 124M (default), B=32 (the largest to fit --gpu-memory=20 GiB: plans {{[0-9.]+}} GiB)
// RUN: gptc compile %models/gpt2.mlir --batch=8 --compile-to=memory-plan -o /dev/null 2>&1 | FileCheck %s --check-prefix=GIVEN
// GIVEN: gptc: model 124M (default), B=8, T=1024, precision bf16 (default)
// RUN: gptc compile %models/gpt2.mlir --target=host --compile-to=memory-plan -o /dev/null 2>&1 | FileCheck %s --check-prefix=HOST
// HOST: gptc: model 124M (default), B=4, T=1024
// RUN: gptc compile %models/gpt2.mlir --model=tiny --compile-to=memory-plan -o /dev/null 2>&1 | FileCheck %s --check-prefix=TINY
// TINY: gptc: model tiny, B=2, T=8

// A GPU too small for even one row, and a bad value, name the flag.
// RUN: not gptc compile %models/gpt2.mlir --gpu-memory=1 --compile-to=memory-plan -o /dev/null 2>&1 | FileCheck %s --check-prefix=TOOSMALL
// TOOSMALL: gptc: error: --gpu-memory=1.0: model 124M needs {{[0-9.]+}} GiB even at --batch=1
// RUN: not gptc compile %models/gpt2.mlir --gpu-memory=0 -o x.fb 2>&1 | FileCheck %s --check-prefix=ZERO
// ZERO: gptc: error: --gpu-memory: expected a number of GiB > 0, got 0

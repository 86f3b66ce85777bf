// Tests --layernorm-grad-one-launch (codegen, CUDA): a layernorm gradient's
// rows kernel also sums dweight and dbias, each warp over a chunk of rows
// into shared memory, and a fold adds the chunks' partials; no kernel reads
// dy and x again for the columns. Where the sums do not fit the chip's
// shared memory, the column kernel stays.

// RUN: rm -rf %t.on && gptc compile %models/gpt2.mlir --model=mini --batch=2 --seq=64 --precision=bf16 --progress=off -o %t.on.fb --dump-ir-after-each-pass=%t.on
// RUN: FileCheck %s --check-prefix=ON < %t.on/kernels.ptx
// RUN: not grep -E "\.entry layernorm_backward_cols_[0-9]+\(" %t.on/kernels.ptx
// ON-LABEL: .entry layernorm_backward_rows_add_cols_
// ON-NOT: .entry
// ON: st.shared.b32
// ON-NOT: .entry
// ON: ld.shared.b32
// ON-LABEL: .entry layernorm_backward_cols_sum_

// =false: the rows kernel stores each row's statistics, and a column kernel
// reads dy, x and them.
// RUN: rm -rf %t.off && gptc compile %models/gpt2.mlir --model=mini --batch=2 --seq=64 --precision=bf16 --progress=off --layernorm-grad-one-launch=false -o %t.off.fb --dump-ir-after-each-pass=%t.off
// RUN: FileCheck %s --check-prefix=OFF < %t.off/kernels.ptx
// OFF-NOT: .entry layernorm_backward_rows_add_cols_
// OFF: .entry layernorm_backward_cols_{{[0-9]+}}(
// OFF-NOT: .entry layernorm_backward_rows_add_cols_

// 1.5B (C = 1600): 8 warps' sums take 100 KiB of shared memory, which
// sm_90 has and sm_120 (99 KiB a block) has not: there the column kernel.
// RUN: rm -rf %t.xl90 && gptc compile %models/gpt2.mlir --model=1558M --batch=1 --seq=64 --precision=bf16 --progress=off -o %t.xl90.fb --dump-ir-after-each-pass=%t.xl90
// RUN: FileCheck %s --check-prefix=XL90 < %t.xl90/kernels.ptx
// RUN: not grep -E "\.entry layernorm_backward_cols_[0-9]+\(" %t.xl90/kernels.ptx
// XL90: .entry layernorm_backward_rows_add_cols_
// RUN: rm -rf %t.xl120 && gptc compile %models/gpt2.mlir --model=1558M --batch=1 --seq=64 --precision=bf16 --cuda-arch=sm_120 --progress=off -o %t.xl120.fb --dump-ir-after-each-pass=%t.xl120
// RUN: FileCheck %s --check-prefix=XL120 < %t.xl120/kernels.ptx
// XL120-NOT: .entry layernorm_backward_rows_add_cols_
// XL120: .entry layernorm_backward_cols_{{[0-9]+}}(
// XL120-NOT: .entry layernorm_backward_rows_add_cols_

// The chunk must be 0 (auto) to 1024 rows, checked before any pass runs.
// RUN: not gptc compile --precision=fp32 %models/gpt2.mlir --model=tiny --layernorm-grad-chunk-rows=-1 -o %t.bad.fb 2>&1 | FileCheck %s --check-prefix=BAD
// BAD-NOT: gpt-instantiate-model
// BAD: gptc: error: --layernorm-grad-chunk-rows: expected 0 (auto) to 1024 rows, got -1

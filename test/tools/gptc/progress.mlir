// gptc compile's progress on stderr. Off a terminal (as here) `auto` writes
// a line per pass and per codegen stage: [k/N], the step, its seconds.

// RUN: gptc compile --precision=fp32 %models/gpt2.mlir --model=tiny --target=host -o %t.fb 2>&1 >/dev/null | FileCheck %s --check-prefix=LINES
// LINES: gptc: model tiny, B=2, T=8, precision fp32, host, any number of ranks (gptrun --gpus N)
// LINES-NEXT: gptc: [ 1/17] gpt-instantiate-model
// LINES: gptc: [ 3/17] gpt-autodiff
// LINES: gptc: [10/17] gpt-insert-all-reduce
// LINES-NEXT: gptc: [11/17] gpt-fuse-matmul-epilogue
// LINES-NEXT: gptc: [12/17] gpt-fuse-adamw
// LINES-NEXT: gptc: [13/17] gpt-fuse-elementwise
// LINES: gptc: [14/17] gpt-plan-memory
// LINES-NEXT: gptc: [15/17] codegen: lower programs
// LINES-NEXT: gptc: [16/17] codegen: host object
// LINES-NEXT: gptc: [17/17] codegen: serialize {{.*}} s ({{.*}} s)

// An IR phase counts only its passes.
// RUN: gptc compile --precision=fp32 %models/gpt2.mlir --model=tiny --compile-to=import 2>&1 >/dev/null | FileCheck %s --check-prefix=IMPORT
// IMPORT: gptc: model tiny, B=2, T=8, precision fp32
// IMPORT-NEXT: gptc: [ 1/2] gpt-instantiate-model
// IMPORT-NEXT: gptc: [ 2/2] cse

// The bar redraws one line (carriage returns) and ends it once.
// RUN: gptc compile --precision=fp32 %models/gpt2.mlir --model=tiny --compile-to=import --progress=bar 2>&1 >/dev/null | tr '\r' '|' | FileCheck %s --check-prefix=BAR
// BAR: gptc: model tiny, B=2, T=8, precision fp32
// BAR-NEXT: {{^}}|gptc: [############............] 1/2 gpt-instantiate-model
// BAR-SAME: |gptc: [########################] 2/2 cse ({{.*}} s){{.*}}{{$}}
// BAR-EMPTY:

// --progress=off is silent; a bad value is named.
// RUN: gptc compile --precision=fp32 %models/gpt2.mlir --model=tiny --compile-to=import --progress=off 2>&1 >/dev/null | count 0
// RUN: not gptc compile --precision=fp32 %models/gpt2.mlir --model=tiny --progress=sometimes 2>&1 | FileCheck %s --check-prefix=BAD
// BAD: --progress: expected auto, bar, lines or off, got 'sometimes'

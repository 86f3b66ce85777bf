// gptc compile's progress on stderr. Off a terminal (as here) `auto` writes
// a line per pass and per codegen stage: [k/N], the step, its seconds.

// RUN: gptc compile %models/gpt2.mlir --model=tiny --target=host -o %t.fb 2>&1 >/dev/null | FileCheck %s --check-prefix=LINES
// LINES: gptc: [ 1/19] gpt-instantiate-model
// LINES: gptc: [ 3/19] gpt-autodiff
// LINES: gptc: [10/19] gpt-fuse-matmul-epilogue
// LINES: gptc: [11/19] gpt-fuse-adamw
// LINES: gptc: [12/19] gpt-fuse-elementwise
// LINES: gptc: [16/19] gpt-plan-memory
// LINES-NEXT: gptc: [17/19] codegen: lower programs
// LINES-NEXT: gptc: [18/19] codegen: host object
// LINES-NEXT: gptc: [19/19] codegen: serialize {{.*}} s ({{.*}} s)

// An IR phase counts only its passes.
// RUN: gptc compile %models/gpt2.mlir --model=tiny --compile-to=import 2>&1 >/dev/null | FileCheck %s --check-prefix=IMPORT
// IMPORT: gptc: [ 1/2] gpt-instantiate-model
// IMPORT-NEXT: gptc: [ 2/2] cse

// The bar redraws one line (carriage returns) and ends it once.
// RUN: gptc compile %models/gpt2.mlir --model=tiny --compile-to=import --progress=bar 2>&1 >/dev/null | tr '\r' '|' | FileCheck %s --check-prefix=BAR
// BAR: {{^}}|gptc: [############............] 1/2 gpt-instantiate-model
// BAR-SAME: |gptc: [########################] 2/2 cse ({{.*}} s){{.*}}{{$}}
// BAR-EMPTY:

// --progress=off is silent; a bad value is named.
// RUN: gptc compile %models/gpt2.mlir --model=tiny --compile-to=import --progress=off 2>&1 >/dev/null | count 0
// RUN: not gptc compile %models/gpt2.mlir --model=tiny --progress=sometimes 2>&1 | FileCheck %s --check-prefix=BAD
// BAD: --progress: expected auto, bar, lines or off, got 'sometimes'

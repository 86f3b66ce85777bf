// Tests that malformed input gives an MLIR diagnostic with file:line:col and
// a non-zero exit, never a crash.

// RUN: not gptc compile --precision=fp32 %S/Inputs/syntax-error.mlir 2>&1 | FileCheck %s --check-prefix=SYNTAX
// SYNTAX: syntax-error.mlir:5:18: error: expected ':'

// RUN: not gptc compile --precision=fp32 %S/Inputs/unknown-op.mlir 2>&1 | FileCheck %s --check-prefix=UNKNOWN
// UNKNOWN: unknown-op.mlir:3:8: error: unregistered operation 'gpt.frobnicate' found in dialect ('gpt')

// RUN: not gptc compile --precision=fp32 %S/Inputs/bad-shape.mlir 2>&1 | FileCheck %s --check-prefix=SHAPE
// SHAPE: bad-shape.mlir:4:8: error: 'gpt.linear' op input has 16 features but weight (N, K) has K = 8

// RUN: not gptc compile --precision=fp32 %S/Inputs/bad-dtype.mlir 2>&1 | FileCheck %s --check-prefix=DTYPE
// DTYPE: bad-dtype.mlir:3:8: error: 'gpt.gelu' op operand #0 must be ranked tensor of 16-bit float or bfloat16 type or 32-bit float or 64-bit float values, but got 'tensor<4xi32>'

// RUN: not gptc run-reference --precision=fp32 %S/Inputs/bad-shape.mlir --model=tiny 2>&1 | FileCheck %s --check-prefix=SHAPE

// f64 parameters over an f32 input verify (the reference interpreter runs
// them) but have no kernels: codegen names the parameter, no ill-typed code.
// RUN: not gptc compile --precision=fp32 %S/Inputs/f64-params.mlir --model=toy --target=host -o %t.fb 2>&1 | FileCheck %s --check-prefix=F64
// RUN: not gptc compile %S/Inputs/f64-params.mlir --model=toy --precision=bf16 -o %t.fb 2>&1 | FileCheck %s --check-prefix=F64
// F64: f64-params.mlir:6:3: error: codegen: @init result #2 ('ln_f.weight') is 'tensor<16xf64>'; kernels take f32, bf16 and f16 tensors and i32 token ids
// F64-NOT: error

// An IR phase written to a .fb name is refused before any pass.
// RUN: not gptc compile --precision=fp32 %models/gpt2.mlir --model=tiny --compile-to=memory-plan -o %t.fb 2>&1 | FileCheck %s --check-prefix=PHASE
// PHASE: gptc: error: --compile-to=memory-plan writes MLIR text, but -o {{.*}}.fb names an executable (.fb): use --compile-to=executable or another name

// gptc explain on a directory names it (ifstream threw and aborted).
// RUN: not gptc explain %S 2>&1 | FileCheck %s --check-prefix=EXPLAINDIR
// EXPLAINDIR: gptc: error: {{.*}}gptc: is a directory, not an executable

// A mistyped command is named (llvm::cl said "Too many positional arguments").
// RUN: not gptc frobnicate %models/gpt2.mlir 2>&1 | FileCheck %s --check-prefix=COMMAND
// COMMAND: gptc: error: unknown command 'frobnicate': expected compile, run-reference or explain

// An executable given as the model is named as one, its bytes not quoted.
// RUN: gptc compile --precision=fp32 %models/gpt2.mlir --model=tiny --target=host -o %t.exe.fb
// RUN: not gptc compile --precision=fp32 %t.exe.fb 2>&1 | FileCheck %s --check-prefix=EXEASMODEL
// EXEASMODEL: gptc: error: '{{.*}}.exe.fb' is a gptc executable (step.fb), not a model: gptc explain reads it

// A failed write names -o (LLVM's fatal "IO failure on output stream" did not).
// RUN: not gptc compile --precision=fp32 %models/gpt2.mlir --model=tiny --compile-to=import -o /dev/full 2>&1 | FileCheck %s --check-prefix=FULL
// FULL: gptc: error: -o /dev/full: cannot write: No space left on device

// A head dimension past the attention kernels' 256 is refused at the op
// (codegen unrolled it, taking minutes and then memory without bound).
// RUN: sed 's/n_head = 2,  n_embd = 16,/n_head = 1,  n_embd = 512,/' %models/gpt2.mlir > %t.heads.mlir
// RUN: not gptc compile --precision=fp32 %t.heads.mlir --model=tiny --target=host -o %t.heads.fb 2>&1 | FileCheck %s --check-prefix=HEADDIM
// HEADDIM: error: codegen: head dimension 512 is over 256, the most the attention kernels keep in registers

// run-reference fails on a diverged run, as gptrun does.
// RUN: not gptc run-reference --precision=fp32 %models/gpt2.mlir --model=tiny --steps=3 --lr=1e38 2>&1 | FileCheck %s --check-prefix=DIVERGED
// DIVERGED: gptc: error: step 2: the loss or the grad norm is not finite

// The input as -o, directly or through a link, is refused before any work
// and left whole (compared by inode, not by name).
// RUN: rm -rf %t.alias && mkdir -p %t.alias && cp %models/gpt2.mlir %t.alias/m.mlir && ln -s m.mlir %t.alias/link.mlir
// RUN: not gptc compile %t.alias/m.mlir --model=tiny --compile-to=import -o %t.alias/m.mlir 2>&1 | FileCheck %s --check-prefix=ALIAS
// RUN: not gptc compile %t.alias/m.mlir --model=tiny --compile-to=import -o %t.alias/link.mlir 2>&1 | FileCheck %s --check-prefix=ALIAS
// ALIAS-NOT: gpt-instantiate-model
// ALIAS: gptc: error: -o {{.*}}.mlir is the input file '{{.*}}m.mlir': gptc never overwrites its input
// RUN: cmp %t.alias/m.mlir %models/gpt2.mlir

// A failed write leaves the previous output whole: the new one is written
// beside it and renamed over it.
// RUN: gptc compile %models/gpt2.mlir --model=tiny --compile-to=import -o %t.alias/out.mlir --progress=off
// RUN: cp %t.alias/out.mlir %t.alias/before.mlir
// RUN: not gptc compile %models/gpt2.mlir --model=tiny --compile-to=nope -o %t.alias/out.mlir 2>&1
// RUN: cmp %t.alias/out.mlir %t.alias/before.mlir
// RUN: ls -a %t.alias | FileCheck %s --check-prefix=NOTEMP
// NOTEMP-NOT: .tmp-

// Endless or device inputs are refused before they are read.
// RUN: not gptc compile /dev/zero 2>&1 | FileCheck %s --check-prefix=DEVZERO
// DEVZERO: gptc: error: '/dev/zero' is not a regular file
// RUN: not gptc run-reference %models/gpt2.mlir --model=tiny --data=/dev/zero 2>&1 | FileCheck %s --check-prefix=DATAZERO
// DATAZERO: gptc: error: --data: '/dev/zero' is not a regular file

// --batch=0 and --seq=0 are mistakes, not "the preset's".
// RUN: not gptc compile %models/gpt2.mlir --model=tiny --batch=0 2>&1 | FileCheck %s --check-prefix=BATCH0
// BATCH0: gptc: error: --batch: expected a number >= 1, got 0
// RUN: not gptc compile %models/gpt2.mlir --model=tiny --seq=0 2>&1 | FileCheck %s --check-prefix=SEQ0
// SEQ0: gptc: error: --seq: expected a number >= 1, got 0

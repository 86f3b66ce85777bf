// Tests of the gptc driver's run-reference command.

// RUN: gptc run-reference %models/gpt2.mlir --model=tiny | FileCheck %s --check-prefix=F64
// F64: model tiny: B=2 T=8, 7872 parameters
// F64: loss (fp64): 4.1{{[0-9]+}}

// fp32 and the decomposed attention give the same loss to ~1e-6.
// RUN: gptc run-reference %models/gpt2.mlir --model=tiny --precision=fp32 | FileCheck %s --check-prefix=F32
// F32: loss (fp32): 4.10897{{[0-9]+}}
// RUN: gptc run-reference %models/gpt2.mlir --model=tiny --decompose-attention | FileCheck %s --check-prefix=DECOMP
// DECOMP: loss (fp64): 4.10897{{[0-9]+}}

// RUN: not gptc run-reference %models/gpt2.mlir --model=tiny --precision=fp8 2>&1 | FileCheck %s --check-prefix=PREC
// PREC: gptc: error: --precision: expected fp64 or fp32, got 'fp8'

// A token file that is not llm.c's format is rejected with the reason.
// RUN: printf 'not a token file' > %t.bin
// RUN: not gptc run-reference %models/gpt2.mlir --model=tiny --data=%t.bin 2>&1 | FileCheck %s --check-prefix=DATA
// DATA: gptc: error: --data: '{{.*}}.bin' is shorter than the 1024-byte header

// Tests of the gptc driver's run-reference command.

// RUN: gptc run-reference --precision=fp32 %models/gpt2.mlir --model=tiny | FileCheck %s --check-prefix=F64
// F64: model tiny: B=2 T=8, 7872 parameters
// F64: loss (fp64): 4.11906{{[0-9]+}}

// fp32 and the decomposed attention give the same loss to ~1e-6.
// RUN: gptc run-reference --precision=fp32 %models/gpt2.mlir --model=tiny --arithmetic=fp32 | FileCheck %s --check-prefix=F32
// F32: loss (fp32): 4.11906{{[0-9]+}}
// RUN: gptc run-reference --precision=fp32 %models/gpt2.mlir --model=tiny --decompose-attention | FileCheck %s --check-prefix=DECOMP
// DECOMP: loss (fp64): 4.11906{{[0-9]+}}

// --steps runs the compiled @train_step from @init's parameters.
// RUN: gptc run-reference --precision=fp32 %models/gpt2.mlir --model=tiny --steps=3 --lr=1e-2 --accum-steps=2 | FileCheck %s --check-prefix=STEPS
// STEPS: step    1/3: loss 4.{{[0-9]+}}  grad_norm {{[0-9.]+}}
// STEPS: step    2/3:
// STEPS: step    3/3:

// RUN: not gptc run-reference --precision=fp32 %models/gpt2.mlir --model=tiny --arithmetic=fp8 2>&1 | FileCheck %s --check-prefix=PREC
// PREC: gptc: error: --arithmetic: expected fp64 or fp32, got 'fp8'

// A token file that is not llm.c's format is rejected with the reason.
// RUN: printf 'not a token file' > %t.bin
// RUN: not gptc run-reference --precision=fp32 %models/gpt2.mlir --model=tiny --data=%t.bin 2>&1 | FileCheck %s --check-prefix=DATA
// DATA: gptc: error: --data: '{{.*}}.bin' is shorter than the 1024-byte header

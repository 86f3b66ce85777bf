// Tests that gptc writes a step.fb executable for both targets, with the
// kernels' IR and PTX in the dump directory.

// RUN: rm -rf %t.cuda && gptc compile %models/gpt2.mlir --model=tiny -o %t.cuda.fb --dump-ir-after-each-pass=%t.cuda
// RUN: FileCheck %s --check-prefix=GPU < %t.cuda/kernels.gpu.mlir
// GPU: gpu.module @gptc_kernels [#nvvm.target<O = 3, chip = "sm_90", features = "+ptx80">]
// GPU: gpu.func @embed_forward_{{[0-9]+}}({{.*}}) kernel
// GPU: gpu.func @attention_forward_{{[0-9]+}}
// GPU: gpu.func @adamw_{{[0-9]+}}
// RUN: FileCheck %s --check-prefix=PTX < %t.cuda/kernels.ptx
// PTX: .target sm_90
// PTX: .visible .entry layernorm_forward_{{[0-9]+}}(
// PTX-NOT: .extern .func __nv_
// RUN: head -c 8 %t.cuda.fb | tail -c 4 | FileCheck %s --check-prefix=IDENT
// IDENT: GPTX

// RUN: rm -rf %t.host && gptc compile %models/gpt2.mlir --model=tiny --target=host -o %t.host.fb --dump-ir-after-each-pass=%t.host
// RUN: FileCheck %s --check-prefix=HOST < %t.host/kernels.host.ll
// HOST: define void @gelu_forward_{{[0-9]+}}(ptr
// RUN: head -c 8 %t.host.fb | tail -c 4 | FileCheck %s --check-prefix=IDENT

// Binary output needs a file, and the target must be known.
// RUN: not gptc compile %models/gpt2.mlir --model=tiny --compile-to=executable 2>&1 | FileCheck %s --check-prefix=STDOUT
// STDOUT: gptc: error: the executable is binary: give -o FILE.fb
// RUN: not gptc compile %models/gpt2.mlir --model=tiny --target=tpu -o %t.x.fb 2>&1 | FileCheck %s --check-prefix=TARGET
// TARGET: gptc: error: --target: expected cuda or host, got 'tpu'

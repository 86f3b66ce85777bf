// Tests that gptc writes a step.fb executable for both targets, with the
// kernels' IR and PTX in the dump directory.

// RUN: rm -rf %t.cuda && gptc compile --precision=fp32 %models/gpt2.mlir --model=tiny -o %t.cuda.fb --dump-ir-after-each-pass=%t.cuda
// The kernels in 4 modules, compiled in parallel, kernel i in module i % 4.
// RUN: FileCheck %s --check-prefix=MODULES < %t.cuda/kernels.gpu.mlir
// MODULES-COUNT-4: gpu.module @gptc_kernels_{{[0-3]}} [#nvvm.target<O = 3, chip = "sm_90", features = "+ptx80">]
// MODULES-NOT: gpu.module
// RUN: FileCheck %s --check-prefix=GPU < %t.cuda/kernels.gpu.mlir
// GPU-DAG: gpu.func @embed_forward_{{[0-9]+}}({{.*}}) kernel
// GPU-DAG: gpu.func @attention_forward_{{[0-9]+}}
// GPU-DAG: gpu.func @crossentropy_backward_fused_{{[0-9]+}}
// GPU-DAG: gpu.func @adamw_multi_{{[0-9]+}}
// RUN: FileCheck %s --check-prefix=ONLINE < %t.cuda/kernels.gpu.mlir
// ONLINE: gpu.func @crossentropy_forward_online_{{[0-9]+}}
// ONLINE-NOT: gpu.func
// ONLINE: gpu.shuffle xor
// RUN: FileCheck %s --check-prefix=PTX < %t.cuda/kernels.ptx
// PTX: .target sm_90
// PTX: .visible .entry layernorm_forward_{{[0-9]+}}(
// PTX-NOT: .extern .func __nv_
// RUN: head -c 8 %t.cuda.fb | tail -c 4 | FileCheck %s --check-prefix=IDENT
// IDENT: GPTX

// RUN: rm -rf %t.host && gptc compile --precision=fp32 %models/gpt2.mlir --model=tiny --target=host -o %t.host.fb --dump-ir-after-each-pass=%t.host
// RUN: FileCheck %s --check-prefix=HOST < %t.host/kernels.host.ll
// HOST: define void @layernorm_forward_{{[0-9]+}}(ptr
// RUN: head -c 8 %t.host.fb | tail -c 4 | FileCheck %s --check-prefix=IDENT

// --precision=bf16: bf16 GEMM descriptors; kernels load bf16 and round
// f32 results to bf16 (CUDA: cvt.rn.bf16.f32; Host: integer code, no
// bfloat conversion left for a libgcc helper).
// RUN: rm -rf %t.bf16 && gptc compile %models/gpt2.mlir --model=tiny --precision=bf16 -o %t.bf16.fb --dump-ir-after-each-pass=%t.bf16
// RUN: FileCheck %s --check-prefix=BF16CMD < %t.bf16/commands.txt
// BF16CMD: gemm m=48 n=16 k=16 batch=1 TN bf16xbf16->bf16 {{.*}} // {{.*}} = gpt.linear{{$}}
// BF16CMD: gemm m=64 n=16 k=16 batch=1 TN bf16xbf16->bf16 epilogue=BiasGeluAux {{.*}} // {{.*}} = gpt.fusion{{$}}
// gelu-bias-grad without bias-grad: the GELU layer's bias gradient comes
// from its DGELU GEMM and no dW GEMM carries BGradB.
// RUN: gptc compile %models/gpt2.mlir --model=tiny --precision=bf16 --matmul-epilogues=gelu,gelu-grad,gelu-bias-grad -o %t.gbg.fb --dump-ir-after-each-pass=%t.gbg
// RUN: FileCheck %s --check-prefix=GBG < %t.gbg/commands.txt
// GBG-NOT: epilogue=BGradB
// GBG: NN bf16xbf16->bf16 epilogue=DGeluBGrad {{.*}} // {{.*}} = gpt.fusion{{$}}
// GBG-NOT: epilogue=BGradB
// The same compile without the epilogue fusion: GELU is its own kernel.
// RUN: gptc compile %models/gpt2.mlir --model=tiny --precision=bf16 --fuse-matmul-epilogue=false -o %t.noepi.fb --dump-ir-after-each-pass=%t.noepi
// RUN: FileCheck %s --check-prefix=NOEPI < %t.noepi/commands.txt
// NOEPI-NOT: epilogue=BiasGeluAux
// NOEPI: launch gelu_forward_{{[0-9]+}}
// Only the bias gradients: GELU stays a kernel, the dW GEMMs carry BGradB.
// RUN: gptc compile %models/gpt2.mlir --model=tiny --precision=bf16 --matmul-epilogues=bias-grad -o %t.bgrad.fb --dump-ir-after-each-pass=%t.bgrad
// RUN: FileCheck %s --check-prefix=BGRAD < %t.bgrad/commands.txt
// BGRAD-NOT: epilogue=BiasGeluAux
// BGRAD: launch gelu_forward_{{[0-9]+}}
// BGRAD: epilogue=BGradB
// RUN: not gptc compile --precision=fp32 %models/gpt2.mlir --model=tiny --matmul-epilogues=gelu,relu -o %t.x.fb 2>&1 | FileCheck %s --check-prefix=EPIBAD
// EPIBAD: gptc: error: --matmul-epilogues: expected gelu, gelu-grad, gelu-bias-grad or bias-grad, got 'relu'
// The fused AdamW takes 8 consecutive elements per thread as 16-byte vectors.
// RUN: FileCheck %s --check-prefix=ADAMW < %t.bf16/kernels.ptx
// ADAMW-LABEL: .entry adamw_multi
// ADAMW: ld.global.v4.b32
// ADAMW: st.global.v4.b32
// RUN: FileCheck %s --check-prefix=BF16PTX < %t.bf16/kernels.ptx
// BF16PTX: cvt.rn.bf16.f32
// RUN: rm -rf %t.bf16h && gptc compile %models/gpt2.mlir --model=tiny --precision=bf16 --target=host -o %t.bf16h.fb --dump-ir-after-each-pass=%t.bf16h
// RUN: FileCheck %s --check-prefix=BF16HOST < %t.bf16h/kernels.host.ll
// BF16HOST-NOT: fptrunc {{.*}} to bfloat
// BF16HOST-NOT: fpext bfloat

// Binary output needs a file, and the target must be known.
// RUN: not gptc compile --precision=fp32 %models/gpt2.mlir --model=tiny --compile-to=executable 2>&1 | FileCheck %s --check-prefix=STDOUT
// STDOUT: gptc: error: the executable is binary: give -o FILE.fb
// RUN: not gptc compile --precision=fp32 %models/gpt2.mlir --model=tiny --target=tpu -o %t.x.fb 2>&1 | FileCheck %s --check-prefix=TARGET
// TARGET: gptc compile: for the --target option: expected cuda or host, got 'tpu'

// --enable-patterns=fp8-gelu-matmul-codes: the steady FP8 step's MLP GEMMs write the GELU's
// codes (an FP8 D, the pre-activation as aux, the D scale and the amax
// history after the operands' scales) and a byte transpose reads them; the
// first step, whose scales are measured from the product, keeps the cast.
// RUN: rm -rf %t.on && gptc compile %models/gpt2.mlir --model=mini --batch=2 --seq=64 --precision=fp8 --enable-patterns=fp8-gelu-matmul-codes --progress=off -o %t.on.fb --dump-ir-after-each-pass=%t.on
// RUN: FileCheck %s --check-prefix=ON < %t.on/commands.txt
// ON-LABEL: program train_step
// ON: gemm m=256 n=128 k=64 batch=1 TN f8E4M3FNxf8E4M3FN->bf16 d=f8E4M3FN epilogue=BiasGeluAux fast_accum %{{.*}} %{{.*}} %[[Q:[a-z_0-9]+]]<2x64x256>@{{.*}} %{{.*}}<256>@{{.*}} %{{.*}}<2x64x256>@{{.*}} %{{.*}}<>@{{.*}} %{{.*}}<>@{{.*}} %{{.*}}<>@{{.*}} %[[HISTORY:[a-z_0-9]+]]<16>@state{{.*}} // %{{.*}}, %[[Q]], %[[HISTORY]] = gpt.scaled_matmul_gelu_fp8
// ON-NEXT: launch fp8_transpose_{{[0-9]+}} {{.*}} %[[Q]]<2x64x256>@{{.*}} // %{{[0-9]+}} = gpt.fp8_transpose
// ON: d=f8E4M3FN epilogue=BiasGeluAux
// ON-NOT: d=f8E4M3FN
// ON-LABEL: program forward
// ON-LABEL: program train_step_first
// ON-NOT: d=f8E4M3FN

// Off (the default): no GEMM writes FP8 codes.
// RUN: rm -rf %t.off && gptc compile %models/gpt2.mlir --model=mini --batch=2 --seq=64 --precision=fp8 --progress=off -o %t.off.fb --dump-ir-after-each-pass=%t.off
// RUN: not grep "d=f8E4M3FN" %t.off/commands.txt

// Tests gptc's --fuse-adamw flag on the model's train step.

// By default the memory-plan phase updates every parameter with one gpt.adamw_multi.
// RUN: gptc compile --precision=fp32 %models/gpt2.mlir --model=tiny --compile-to=memory-plan | FileCheck %s --check-prefix=FUSED
// FUSED-LABEL: func.func @train_step
// FUSED-NOT: gpt.adamw %
// FUSED: gpt.adamw_multi
// FUSED-NOT: gpt.adamw %
// FUSED: return

// --fuse-adamw=false keeps one gpt.adamw per parameter.
// RUN: gptc compile --precision=fp32 %models/gpt2.mlir --model=tiny --compile-to=memory-plan --fuse-adamw=false | FileCheck %s --check-prefix=UNFUSED
// UNFUSED-LABEL: func.func @train_step
// UNFUSED-NOT: gpt.adamw_multi
// UNFUSED: gpt.adamw %
// UNFUSED: gpt.adamw %
// UNFUSED-NOT: gpt.adamw_multi
// UNFUSED: return

// In bf16 the update and the gradient norm read the bf16 weight gradients (narrow-grads).
// RUN: gptc compile %models/gpt2.mlir --model=tiny --precision=bf16 --compile-to=memory-plan | FileCheck %s --check-prefix=NARROW
// NARROW-LABEL: func.func @train_step
// NARROW: gpt.global_norm {{.*}}xbf16>
// NARROW: gpt.adamw_multi {{.*}} grads ({{.*}}xbf16>
// NARROW: return

// --narrow-grads=false: both read f32 copies.
// RUN: gptc compile %models/gpt2.mlir --model=tiny --precision=bf16 --compile-to=memory-plan --narrow-grads=false | FileCheck %s --check-prefix=WIDEGRADS
// WIDEGRADS-LABEL: func.func @train_step
// WIDEGRADS: gpt.global_norm
// WIDEGRADS-NOT: xbf16>) -> tensor<f32>
// WIDEGRADS: gpt.adamw_multi
// WIDEGRADS-NOT: grads (
// WIDEGRADS: return

// Tests of --dump-ir-after-each-pass: DIR/NN-<pass>.mlir,
// where NN is the pass's place in the whole pipeline (every optional pass
// on), and commands.txt, which names values and ops as the last dump does.

// The whole pipeline: every flag that adds a pass, each pass at its place,
// none left without one (NN.k).
// RUN: rm -rf %t.all && gptc compile %models/gpt2.mlir --model=tiny --precision=fp8 --fp8-lm-head --enable-patterns=fp8-gelu-matmul-codes --accum-steps=2 --fuse-grad-accumulation --world-size=2 --zero=1 --memory-budget=1 --compile-to=memory-plan --progress=off --dump-ir-after-each-pass=%t.all -o %t.all.mlir 2>/dev/null
// RUN: ls %t.all | FileCheck %s --check-prefix=ALL
// ALL:      00-input.mlir
// ALL-NEXT: 01-gpt-instantiate-model.mlir
// ALL-NEXT: 02-cse.mlir
// ALL-NEXT: 03-gpt-mixed-precision.mlir
// ALL-NEXT: 04-gpt-autodiff.mlir
// ALL-NEXT: 05-cse.mlir
// ALL-NEXT: 06-gpt-insert-optimizer.mlir
// ALL-NEXT: 07-gpt-insert-init.mlir
// ALL-NEXT: 08-gpt-insert-logits.mlir
// ALL-NEXT: 09-inline.mlir
// ALL-NEXT: 10-cse.mlir
// ALL-NEXT: 11-gpt-lower-fp8.mlir
// ALL-NEXT: 12-cse.mlir
// ALL-NEXT: 13-gpt-fuse-fp8.mlir
// ALL-NEXT: 14-gpt-fp8-delayed-scaling.mlir
// ALL-NEXT: 15-gpt-fuse-fp8.mlir
// ALL-NEXT: 16-gpt-fuse-grad-accumulation.mlir
// ALL-NEXT: 17-gpt-insert-all-reduce.mlir
// ALL-NEXT: 18-gpt-shard-optimizer.mlir
// ALL-NEXT: 19-gpt-fp8-steady-step.mlir
// ALL-NEXT: 20-gpt-fuse-fp8.mlir
// ALL-NEXT: 21-gpt-rematerialize.mlir
// ALL-NEXT: 22-gpt-fuse-matmul-epilogue.mlir
// ALL-NEXT: 23-gpt-fuse-adamw.mlir
// ALL-NEXT: 24-gpt-fuse-elementwise.mlir
// ALL-NEXT: 25-gpt-fuse-fp8.mlir
// ALL-NEXT: 26-gpt-plan-memory.mlir
// ALL-NOT: {{.}}

// A flag that turns passes off leaves gaps: every other dump keeps its
// name. Here the fusions' (24, 23).
// RUN: rm -rf %t.on %t.off
// RUN: gptc compile %models/gpt2.mlir --model=tiny --compile-to=memory-plan --progress=off --dump-ir-after-each-pass=%t.on -o %t.on.mlir
// RUN: gptc compile %models/gpt2.mlir --model=tiny --compile-to=memory-plan --progress=off --fuse-elementwise=false --fuse-adamw=false --dump-ir-after-each-pass=%t.off -o %t.off.mlir
// RUN: ls %t.on | grep -v -e -gpt-fuse-elementwise -e -gpt-fuse-adamw > %t.on.rest
// RUN: ls %t.off > %t.off.all
// RUN: diff %t.on.rest %t.off.all
// RUN: FileCheck %s --check-prefix=OFF < %t.off.all
// OFF:      22-gpt-fuse-matmul-epilogue.mlir
// OFF-NEXT: 26-gpt-plan-memory.mlir

// gpt-fuse-fp8 runs at four places, each a place of its own: with the
// first one's pattern disabled the others keep their numbers.
// RUN: rm -rf %t.fp8 && gptc compile %models/gpt2.mlir --model=tiny --precision=fp8 --disable-patterns=fp8-cross-entropy-grad --compile-to=memory-plan --progress=off --dump-ir-after-each-pass=%t.fp8 -o %t.fp8.mlir
// RUN: ls %t.fp8 | FileCheck %s --check-prefix=FP8PLACES
// FP8PLACES:      12-cse.mlir
// FP8PLACES-NEXT: 14-gpt-fp8-delayed-scaling.mlir
// FP8PLACES-NEXT: 15-gpt-fuse-fp8.mlir
// FP8PLACES:      19-gpt-fp8-steady-step.mlir
// FP8PLACES-NEXT: 20-gpt-fuse-fp8.mlir
// FP8PLACES:      24-gpt-fuse-elementwise.mlir
// FP8PLACES-NEXT: 25-gpt-fuse-fp8.mlir

// Likewise a pass that a flag adds: bf16's gpt-mixed-precision (03) shifts
// nothing after it.
// RUN: rm -rf %t.fp32 && gptc compile %models/gpt2.mlir --model=tiny --precision=fp32 --compile-to=memory-plan --progress=off --dump-ir-after-each-pass=%t.fp32 -o %t.fp32.mlir
// RUN: ls %t.on | grep -v -e -gpt-mixed-precision > %t.bf16.rest
// RUN: ls %t.fp32 > %t.fp32.all
// RUN: diff %t.bf16.rest %t.fp32.all
// RUN: FileCheck %s --check-prefix=FP32 < %t.fp32.all
// FP32:      02-cse.mlir
// FP32-NEXT: 04-gpt-autodiff.mlir

// --compile-to stops early without renumbering what ran.
// RUN: rm -rf %t.lower && gptc compile %models/gpt2.mlir --model=tiny --compile-to=lower --progress=off --dump-ir-after-each-pass=%t.lower -o %t.lower.mlir
// RUN: ls %t.on | head -n 11 > %t.on.lower
// RUN: ls %t.lower | diff %t.on.lower -

// gpt-plan-memory runs nested on every program: one dump, the last, with
// each program planned.
// RUN: ls %t.on | tail -n 1 | FileCheck %s --check-prefix=PLANS
// PLANS: 26-gpt-plan-memory.mlir
// RUN: FileCheck %s --check-prefix=PLANNED < %t.on/26-gpt-plan-memory.mlir
// PLANNED-LABEL: func.func @forward(
// PLANNED-SAME:  gpt.memory_plan
// PLANNED-LABEL: func.func @logits(
// PLANNED-SAME:  gpt.memory_plan
// PLANNED-LABEL: func.func @train_step(
// PLANNED-SAME:  gpt.memory_plan
// PLANNED-LABEL: func.func @init(
// PLANNED-SAME:  gpt.memory_plan

// commands.txt names values as the last dump does, and each command ends
// with how its op's line starts there.
// RUN: rm -rf %t.host && gptc compile %models/gpt2.mlir --model=tiny --target=host --progress=off --dump-ir-after-each-pass=%t.host -o %t.host.fb
// RUN: awk '/^program train_step$/{p=1;next} /^program/{p=0} p' %t.host/commands.txt > %t.cmds
// RUN: FileCheck %s --check-prefix=CMDS < %t.cmds
// CMDS: launch embed_forward_{{[0-9]+}} threads={{[0-9]+}} wte<64x16>@params+0 wpe<16x16>@params+{{[0-9]+}} %[[IDS:[0-9]+]]<2x8>@inputs+0 %[[EMB:[0-9]+]]<2x8x16>@activations+{{[0-9]+}}   // %[[EMB]] = gpt.embed{{$}}
// CMDS-NEXT: launch layernorm_forward_{{[0-9]+}} threads={{[0-9]+}} %[[EMB]]<2x8x16>@activations+{{.*}}   // %[[LN:[0-9]+]] = gpt.layernorm{{$}}
// CMDS-NEXT: gemm {{.*}} %[[LN]]<2x8x16>@activations+{{.*}}   // %{{[0-9]+}} = gpt.linear{{$}}
// CMDS-NEXT: launch attention_forward_{{[0-9]+}} {{.*}}   // %result, %lse = gpt.causal_attention{{$}}
// The last dump's @train_step: every op line that a command ends with
// starts a line there, and every value a command names is defined there.
// RUN: awk '/func.func @train_step\(/{p=1;next} p && /^  }/{exit} p' %t.host/26-gpt-plan-memory.mlir > %t.step
// RUN: sed -n 's/^    \(%[^=]* = [a-z0-9_.]*\).*/\1/p' %t.step | sort -u > %t.step.ops
// RUN: sed -n 's|.*   // \(%.* = .*\)$|\1|p' %t.cmds | sort -u > %t.cmds.ops
// RUN: not grep -F -x -v -f %t.step.ops %t.cmds.ops
// RUN: sed -n 's/^    \(%[^=]*\) = .*/\1/p' %t.step | tr ',' '\n' | sed 's/^ *//; s/:.*//' | sort -u > %t.step.values
// RUN: sed 's|   //.*||' %t.cmds | grep -o ' %[A-Za-z0-9_]*' | sed 's/^ //' | sort -u > %t.cmds.values
// RUN: not grep -F -x -v -f %t.step.values %t.cmds.values
// And every kernel a command launches is a function of kernels.host.mlir.
// RUN: sed -n 's/^ *[0-9]* launch \([^ ]*\) .*/@\1_impl(/p' %t.cmds | sort -u > %t.cmds.kernels
// RUN: grep -o '@[A-Za-z0-9_]*_impl(' %t.host/kernels.host.mlir | sort -u > %t.host.kernels
// RUN: not grep -F -x -v -f %t.host.kernels %t.cmds.kernels

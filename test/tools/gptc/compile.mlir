// Tests of the gptc driver's compile command.

// The import phase prints static IR with named parameters.
// RUN: gptc compile --precision=fp32 %models/gpt2.mlir --model=tiny --compile-to=import | FileCheck %s --check-prefix=IMPORT
// IMPORT: module attributes {{{.*}}gpt.config = {{{.*}}name = "tiny"{{.*}}gpt.phase = "import"
// IMPORT-LABEL: func.func @forward
// IMPORT-SAME: tensor<2x8xi32> {gpt.input = "tokens"
// IMPORT-SAME: gpt.param = "h.1.mlp.c_proj.weight"
// IMPORT: gpt.cross_entropy {{.*}} -> tensor<f32>

// --batch and --seq override the preset.
// RUN: gptc compile --precision=fp32 %models/gpt2.mlir --model=124M --batch=3 --seq=7 | FileCheck %s --check-prefix=SHAPE
// SHAPE: tensor<3x7xi32> {gpt.input = "tokens"
// SHAPE: gpt.num_parameters = 124475904

// The input phase stops before any pass: the file comes back generic.
// RUN: gptc compile --precision=fp32 %models/gpt2.mlir --compile-to=input | FileCheck %s --check-prefix=INPUT
// INPUT: gpt.models
// INPUT: gpt.repeat @block

// Per-pass dumps: one file per pass, after the parsed input, numbered by
// the pass's place in the whole pipeline (fp32 runs no gpt-mixed-precision,
// 03, nor the FP8 passes; dump-ir.mlir tests the numbering).
// RUN: rm -rf %t.dump && gptc compile --precision=fp32 %models/gpt2.mlir --model=124M --batch=4 --dump-ir-after-each-pass=%t.dump -o %t.out.mlir
// RUN: ls %t.dump | FileCheck %s --check-prefix=DUMPS
// DUMPS: 00-input.mlir
// DUMPS-NEXT: 01-gpt-instantiate-model.mlir
// DUMPS-NEXT: 02-cse.mlir
// DUMPS-NEXT: 04-gpt-autodiff.mlir
// DUMPS-NEXT: 05-cse.mlir
// DUMPS-NEXT: 06-gpt-insert-optimizer.mlir
// DUMPS-NEXT: 07-gpt-insert-init.mlir
// DUMPS-NEXT: 08-gpt-insert-logits.mlir
// DUMPS-NEXT: 09-inline.mlir
// DUMPS-NEXT: 10-cse.mlir
// DUMPS-NEXT: 17-gpt-insert-all-reduce.mlir
// DUMPS-NEXT: 22-gpt-fuse-matmul-epilogue.mlir
// DUMPS-NEXT: 23-gpt-fuse-adamw.mlir
// DUMPS-NEXT: 24-gpt-fuse-elementwise.mlir
// DUMPS-NEXT: 26-gpt-plan-memory.mlir
// RUN: FileCheck %s --check-prefix=DUMP3 < %t.dump/04-gpt-autodiff.mlir
// DUMP3: func.func @forward_grad
// DUMP3: gpt.cross_entropy_grad
// RUN: FileCheck %s --check-prefix=OUT < %t.out.mlir
// OUT: func.func @train_step
// OUT: gpt.memory_plan = {activations =
// OUT: func.func @init
// RUN: FileCheck %s --check-prefix=LOGITS < %t.out.mlir
// LOGITS: func.func @logits(
// LOGITS-SAME: tensor<4x1024x50304xf32>
// RUN: FileCheck %s --check-prefix=DUMP1 < %t.dump/01-gpt-instantiate-model.mlir
// DUMP1: gpt.param = "h.11.ln_2.weight"

// MLIR's own pass-manager flags work too.
// RUN: gptc compile --precision=fp32 %models/gpt2.mlir --model=tiny --mlir-print-ir-after=gpt-instantiate-model -o /dev/null 2>&1 | FileCheck %s --check-prefix=PRINT
// PRINT: IR Dump After InstantiateModelPass (gpt-instantiate-model)

// --precision=bf16 stops at the precision phase with bf16 GEMMs and an fp32 loss
// read straight from the bf16 logits.
// RUN: gptc compile %models/gpt2.mlir --model=tiny --precision=bf16 --compile-to=precision | FileCheck %s --check-prefix=BF16
// BF16-LABEL: func.func @forward
// BF16: gpt.linear {{.*}} -> tensor<2x8x48xbf16>
// BF16: gpt.cross_entropy {{.*}} : (tensor<2x8x64xbf16>, tensor<2x8xi32>) -> tensor<f32>

// fp16: fp16 GEMM operands, and --loss-scale seeds the backward with S.
// RUN: gptc compile %models/gpt2.mlir --model=tiny --precision=fp16 --loss-scale=1024 --compile-to=train-step | FileCheck %s --check-prefix=FP16
// FP16-LABEL: func.func @forward
// FP16: gpt.linear {{.*}} -> tensor<2x8x48xf16>
// FP16-LABEL: func.func private @forward_grad
// FP16: gpt.constant 1.024000e+03 : tensor<f32>
// FP16-LABEL: func.func @train_step
// FP16: %[[NORM:.*]] = gpt.global_norm
// FP16-NEXT: gpt.scale %[[NORM]] {factor = 9.765625E-4 : f64}
// RUN: not gptc compile --precision=fp32 %models/gpt2.mlir --model=tiny --loss-scale=0 2>&1 | FileCheck %s --check-prefix=BADSCALE
// BADSCALE: gptc: error: --loss-scale: expected a finite number > 0, got 0

// --narrow-residual: the residual stream in bf16 through the whole step:
// the embedding stores bf16, the adds and layernorms fuse over bf16 sums,
// and the backward's residual gradient joins in bf16 with no narrow copy;
// the layernorm and embedding tables keep fp32 gradients.
// RUN: gptc compile %models/gpt2.mlir --model=tiny --precision=bf16 --narrow-residual --compile-to=memory-plan | FileCheck %s --check-prefix=NARROW
// NARROW-LABEL: func.func @train_step
// NARROW: gpt.embed {{.*}} : (tensor<64x16xf32>, tensor<16x16xf32>, tensor<2x8xi32>) -> tensor<2x8x16xbf16>
// NARROW: gpt.fusion{{.*}} : (tensor<2x8x16xbf16>, tensor<2x8x16xbf16>, tensor<16xf32>, tensor<16xf32>) -> (tensor<2x8x16xbf16>, tensor<2x8x16xbf16>)
// NARROW: gpt.add {{.*}} : tensor<2x8x16xbf16>
// NARROW-NEXT: gpt.layernorm {{.*}} -> tensor<2x8x16xbf16>
// NARROW: gpt.fusion{{.*}} : (tensor<2x8x16xbf16>, tensor<2x8x16xbf16>, tensor<16xf32>, tensor<2x8x16xbf16>) -> (tensor<2x8x16xbf16>, tensor<16xf32>, tensor<16xf32>)
// NARROW-NEXT: ^bb0
// NARROW-NEXT: gpt.cast {{.*}} : tensor<2x8x16xbf16> to tensor<2x8x16xf32>
// NARROW-NEXT: gpt.layernorm_grad {{.*}} -> (tensor<2x8x16xf32>, tensor<16xf32>, tensor<16xf32>)
// NARROW: gpt.embed_grad {{.*}} : (tensor<2x8x16xbf16>, tensor<2x8xi32>) -> (tensor<64x16xf32>, tensor<16x16xf32>)
// The same stream in fp16 (with its loss scale).
// RUN: gptc compile %models/gpt2.mlir --model=tiny --precision=fp16 --loss-scale=1024 --narrow-residual --compile-to=memory-plan | FileCheck %s --check-prefix=NARROW16
// NARROW16-LABEL: func.func @train_step
// NARROW16: gpt.fusion{{.*}} : (tensor<2x8x16xf16>, tensor<2x8x16xf16>, tensor<16xf32>, tensor<16xf32>) -> (tensor<2x8x16xf16>, tensor<2x8x16xf16>)
// NARROW16: gpt.add {{.*}} : tensor<2x8x16xf16>
// NARROW16-NEXT: gpt.layernorm {{.*}} -> tensor<2x8x16xf16>
// NARROW16: gpt.fusion{{.*}} -> (tensor<2x8x16xf16>, tensor<16xf32>, tensor<16xf32>)
// NARROW16-NEXT: ^bb0
// NARROW16-NEXT: gpt.cast {{.*}} : tensor<2x8x16xf16> to tensor<2x8x16xf32>
// NARROW16-NEXT: gpt.layernorm_grad {{.*}} -> (tensor<2x8x16xf32>, tensor<16xf32>, tensor<16xf32>)
// RUN: not gptc compile --precision=fp32 %models/gpt2.mlir --model=tiny --narrow-residual 2>&1 | FileCheck %s --check-prefix=NARROWFP32
// NARROWFP32: gptc: error: --narrow-residual: needs --precision=bf16, fp16 or fp8 (the stream is fp32 already)

// An unknown precision policy is an error naming the flag.
// RUN: not gptc compile %models/gpt2.mlir --model=tiny --precision=fp4 2>&1 | FileCheck %s --check-prefix=BADPREC
// BADPREC: gptc compile: for the --precision option: expected fp32, bf16, fp16 or fp8, got 'fp4'

// --precision=fp8: the blocks' linear layers are e4m3 x e4m3 products in the
// forward, and their gradients e5m2 x e4m3 products (dX, then dW).
// RUN: gptc compile %models/gpt2.mlir --model=tiny --precision=fp8 --compile-to=train-step | FileCheck %s --check-prefix=FP8
// FP8-LABEL: func.func private @forward_grad
// FP8: gpt.fp8_matmul e4m3 %{{.*}}, e4m3 %{{.*}} {transpose_rhs} : (tensor<2x8x16xbf16>, tensor<48x16xbf16>) -> tensor<2x8x48xbf16>
// FP8: gpt.matmul %{{.*}}, %{{.*}} {transpose_rhs} : (tensor<2x8x16xbf16>, tensor<64x16xbf16>) -> tensor<2x8x64xbf16>
// FP8: gpt.fp8_matmul e5m2 %{{.*}}, e4m3 %{{.*}} : (tensor<2x8x16xbf16>, tensor<16x64xbf16>) -> tensor<2x8x64xbf16>
// FP8: gpt.fp8_matmul e5m2 %{{.*}}, e4m3 %{{.*}} {transpose_lhs} : (tensor<16x16xbf16>, tensor<16x64xbf16>) -> tensor<16x64xbf16>
// ... gpt-lower-fp8 (memory-plan phase) makes each one a scaled GEMM of
// quantized operands, each operand's two layouts from one cast-transpose, and the executable's block GEMMs are FP8 (2
// layers x (4 + 8) in each of @train_step and @train_step_first, 2 x 4 in
// each of @forward and @logits); the LM head's 8 stay bf16 (3 in each
// train step program); --fp8-steady-step=false leaves one train step
// program (24 + 8 + 8 FP8, 5 bf16). In the train step each scale is
// delayed (gpt-fp8-delayed-scaling): 24 amax histories of 16 steps, state
// after AdamW's moments, recorded by the cast-transposes; with
// --fp8-history=0 the scales are current. The backward's casts also sum
// the bias gradients, and the MLP's reads the GELU gradient's inputs
// (gpt-fuse-fp8's fp8-cast-gelu-grad and fp8-cast-column-sum). The first step is a program of its own
// (gpt-fp8-steady-step): @train_step_first measures the tensors while the
// histories are empty; @train_step takes all 24 scales from the histories
// in one gpt.fp8_delayed_scales at its top.
// With --accum-steps=2, --fuse-grad-accumulation sums each block weight's
// gradients in the second micro-batch's GEMM (tiny: 2 layers x 4 weights);
// without it the sums stay adds.
// RUN: gptc compile %models/gpt2.mlir --model=tiny --precision=fp8 --accum-steps=2 --fuse-grad-accumulation --compile-to=memory-plan --progress=off | FileCheck %s --check-prefix=FP8ACCUM
// RUN: gptc compile %models/gpt2.mlir --model=tiny --precision=fp8 --accum-steps=2 --compile-to=memory-plan --progress=off | FileCheck %s --check-prefix=FP8SUM
// FP8ACCUM-LABEL: func.func @train_step(
// FP8ACCUM-COUNT-8: gpt.scaled_matmul {{.*}} accumulate
// FP8ACCUM-NOT: accumulate
// FP8ACCUM-LABEL: func.func @train_step_first(
// FP8SUM-LABEL: func.func @train_step
// FP8SUM-NOT: accumulate

// RUN: gptc compile %models/gpt2.mlir --model=tiny --precision=fp8 --compile-to=memory-plan --progress=off | FileCheck %s --check-prefix=FP8PLAN
// FP8PLAN-LABEL: func.func @forward
// FP8PLAN-NOT: history
// FP8PLAN-LABEL: func.func @logits
// FP8PLAN-LABEL: func.func @train_step(
// FP8PLAN-SAME: gpt.pool = "state", gpt.state = "fp8.amax_history.0"}
// FP8PLAN-SAME: gpt.pool = "state", gpt.state = "fp8.amax_history.23"}, %{{[^:]*}}: tensor<1x2x8xi32>
// FP8PLAN-NEXT: %[[ALL:.*]]:72 = gpt.fp8_delayed_scales (e4m3 %{{.*}}, e4m3
// FP8PLAN-NOT: gpt.fp8_scale
// FP8PLAN: gpt.fp8_cast_transpose e4m3 %{{.*}}, %[[ALL]]#{{[0-9]+}} history %[[ALL]]#{{[0-9]+}}
// FP8PLAN-NOT: gpt.fp8_scale
// FP8PLAN-LABEL: func.func @train_step_first(
// FP8PLAN-SAME: gpt.pool = "state", gpt.state = "fp8.amax_history.23"}, %{{[^:]*}}: tensor<1x2x8xi32>
// FP8PLAN-NOT: gpt.fp8_matmul
// FP8PLAN: gpt.fp8_scale e4m3 %{{.*}} history %{{.*}} : (tensor<2x8x16xbf16>, tensor<16xf32>) -> (tensor<f32>, tensor<f32>, tensor<16xf32>)
// FP8PLAN: gpt.fp8_cast_transpose e4m3 %{{.*}}, %{{.*}} history %{{.*}} : (tensor<2x8x16xbf16>, tensor<f32>, tensor<16xf32>) -> (tensor<2x8x16xf8E4M3FN>, tensor<16x16xf8E4M3FN>, tensor<16xf32>)
// FP8PLAN: gpt.scaled_matmul {{.*}} {fast_accum, gpt.offsets = {{.*}}, transpose_rhs}
// FP8PLAN: gpt.fp8_cast_transpose_sum e5m2 %{{.*}}, %{{.*}} history %{{.*}} -> (tensor<2x8x16xf8E5M2>, tensor<16x16xf8E5M2>, tensor<16xbf16>, tensor<16xf32>)
// FP8PLAN: gpt.fp8_scale e5m2 %[[DH:.*]] gelu_grad %[[PRE:.*]] history
// FP8PLAN-NEXT: gpt.fp8_cast_transpose_sum e5m2 %[[DH]] gelu_grad %[[PRE]], %{{.*}} history %{{.*}} -> (tensor<2x8x64xf8E5M2>, tensor<64x16xf8E5M2>, tensor<64xbf16>, tensor<16xf32>)
// RUN: gptc compile %models/gpt2.mlir --model=tiny --precision=fp8 --disable-patterns=fp8-cast-gelu-grad,fp8-cast-column-sum --compile-to=memory-plan --progress=off | FileCheck %s --check-prefix=FP8UNFUSED
// FP8UNFUSED-LABEL: func.func @train_step
// FP8UNFUSED-NOT: gpt.fp8_cast_transpose_sum
// FP8UNFUSED: gpt.gelu_grad %{{.*}}, %{{.*}} : tensor<2x8x64xf32>
// FP8UNFUSED-NEXT: gpt.reduce sum %{{.*}} dims [0, 1] : (tensor<2x8x64xf32>) -> tensor<64xf32>
// FP8UNFUSED-NOT: gpt.fp8_cast_transpose_sum
// FP8UNFUSED-LABEL: func.func @init
// RUN: gptc compile %models/gpt2.mlir --model=tiny --precision=fp8 --fp8-history=0 --compile-to=memory-plan --progress=off | FileCheck %s --check-prefix=FP8CURRENT
// FP8CURRENT-LABEL: func.func @train_step
// FP8CURRENT-NOT: history
// FP8CURRENT: gpt.fp8_scale e4m3 %{{.*}} : (tensor<2x8x16xbf16>) -> (tensor<f32>, tensor<f32>)
// FP8CURRENT-NOT: history
// FP8CURRENT-LABEL: func.func @init
// RUN: not gptc compile %models/gpt2.mlir --model=tiny --precision=fp8 --fp8-history=-1 2>&1 | FileCheck %s --check-prefix=BADHISTORY
// BADHISTORY: gptc: error: --fp8-history: expected a number of steps >= 0, got -1
// RUN: gptc compile %models/gpt2.mlir --model=tiny --precision=fp8 --target=host --progress=off -o %t-fp8.fb
// RUN: gptc explain %t-fp8.fb | FileCheck %s --check-prefix=FP8EXE
// FP8EXE: precision: fp8, delayed scaling (16 steps); GEMM A operands: BF16 x8 F8E4M3 x64
// RUN: gptc compile %models/gpt2.mlir --model=tiny --precision=fp8 --fp8-steady-step=false --target=host --progress=off -o %t-fp8-unsplit.fb
// RUN: gptc explain %t-fp8-unsplit.fb | FileCheck %s --check-prefix=FP8UNSPLIT
// FP8UNSPLIT: precision: fp8, delayed scaling (16 steps); GEMM A operands: BF16 x5 F8E4M3 x40
// FP8UNSPLIT-NOT: program train_step_first
// --fp8-lm-head: the LM head's 8 GEMMs (3 in each train step program, 1
// in each of @forward and @logits) are FP8 too; it needs --precision=fp8.
// RUN: gptc compile %models/gpt2.mlir --model=tiny --precision=fp8 --fp8-lm-head --target=host --progress=off -o %t-fp8-head.fb
// RUN: gptc explain %t-fp8-head.fb | FileCheck %s --check-prefix=FP8HEAD
// FP8HEAD: precision: fp8, delayed scaling (16 steps), FP8 LM head; GEMM A operands: F8E4M3 x72
// RUN: not gptc compile --precision=fp32 %models/gpt2.mlir --model=tiny --fp8-lm-head 2>&1 | FileCheck %s --check-prefix=BADHEAD
// BADHEAD: gptc: error: --fp8-lm-head: needs --precision=fp8, got fp32

// --list-phases names every phase.
// RUN: gptc --list-phases | FileCheck %s --check-prefix=PHASES
// PHASES: input
// PHASES: import
// PHASES: precision
// PHASES: autodiff
// PHASES: train-step
// PHASES: lower
// PHASES: distribute
// PHASES: schedule
// PHASES: fuse
// PHASES: memory-plan
// PHASES: executable

// --compile-to stops after any phase: after distribute the step holds its
// collectives, but no fusion and no plan yet.
// RUN: gptc compile --precision=fp32 %models/gpt2.mlir --model=tiny --world-size=2 --compile-to=distribute --progress=off | FileCheck %s --check-prefix=DISTRIBUTE
// DISTRIBUTE: gpt.config = {batch = 2 : i64, {{.*}} world_size = 2 : i64}
// DISTRIBUTE: gpt.all_reduce mean
// DISTRIBUTE-NOT: gpt.fusion
// DISTRIBUTE-NOT: gpt.offsets

// RUN: gptc --version | FileCheck %s --check-prefix=VERSION
// VERSION: gptc {{[0-9]+\.[0-9]+\.[0-9]+( \(git [^)]*\))?}} (MLIR/LLVM 22

// An unknown phase is an error naming the flag and the known phases.
// RUN: not gptc compile --precision=fp32 %models/gpt2.mlir --compile-to=nope 2>&1 | FileCheck %s --check-prefix=BADPHASE
// BADPHASE: gptc: error: --compile-to: unknown phase 'nope' (phases: input, import, precision, autodiff, train-step, lower, distribute, schedule, fuse, memory-plan, executable)

// An unknown preset is reported at the module, with the known ones.
// RUN: not gptc compile --precision=fp32 %models/gpt2.mlir --model=2B 2>&1 | FileCheck %s --check-prefix=BADMODEL
// BADMODEL: gpt2.mlir:{{[0-9]+}}:{{[0-9]+}}: error: unknown model preset '2B'; known: 124M, 1558M, 350M, 774M, mini, tiny

// A missing file, a missing command and flags of the other command are errors.
// RUN: not gptc compile --precision=fp32 %t.missing.mlir 2>&1 | FileCheck %s --check-prefix=NOFILE
// NOFILE: gptc: error: cannot open '{{.*}}missing.mlir'
// RUN: not gptc 2>&1 | FileCheck %s --check-prefix=NOCMD
// NOCMD: gptc: error: missing command: compile, run-reference or explain
// RUN: not gptc compile --precision=fp32 %models/gpt2.mlir --arithmetic=fp32 2>&1 | FileCheck %s --check-prefix=WRONGFLAG
// WRONGFLAG: gptc: error: --arithmetic, --seed, --decompose-attention, --data and --steps apply to run-reference
// RUN: not gptc run-reference --precision=fp32 %models/gpt2.mlir --model=tiny --cuda-arch=sm_80 2>&1 | FileCheck %s --check-prefix=CODEGENFLAG
// CODEGENFLAG: gptc: error: --cuda-arch configures the executable's kernels; run-reference interprets the IR (give it to compile)

// --world-size distributes the train step: bucketed gradient all-reduces
// after inlining, and the world size in the module's config.
// RUN: gptc compile --precision=fp32 %models/gpt2.mlir --model=tiny --compile-to=memory-plan --world-size=2 --bucket-mb=0.004 | FileCheck %s --check-prefix=WORLD
// WORLD: world_size = 2 : i64
// WORLD-LABEL: func.func @train_step
// WORLD: gpt.all_reduce mean {{.*}}bucket = 0 : i64
// WORLD: gpt.all_reduce mean {{.*}}bucket = 1 : i64
// WORLD: gpt.global_norm

// A negative or huge world size and a bucket size that is not a number of
// MiB are errors naming the flag, with or without distribution.
// RUN: not gptc compile --precision=fp32 %models/gpt2.mlir --model=tiny --compile-to=memory-plan --world-size=-2 2>&1 | FileCheck %s --check-prefix=BADWORLD
// BADWORLD: gptc: error: --world-size: expected any or a number of ranks from 1 to 65536, got '-2'
// RUN: not gptc compile --precision=fp32 %models/gpt2.mlir --model=tiny --compile-to=memory-plan --world-size=100000 2>&1 | FileCheck %s --check-prefix=HUGEWORLD
// HUGEWORLD: gptc: error: --world-size: expected any or a number of ranks from 1 to 65536, got '100000'
// RUN: not gptc compile --precision=fp32 %models/gpt2.mlir --model=tiny --compile-to=memory-plan --world-size=2 --bucket-mb=nan 2>&1 | FileCheck %s --check-prefix=BADBUCKET
// RUN: not gptc compile --precision=fp32 %models/gpt2.mlir --model=tiny --compile-to=memory-plan --bucket-mb=nan 2>&1 | FileCheck %s --check-prefix=BADBUCKET
// BADBUCKET: gptc: error: --bucket-mb: expected a number of MiB from 0 to 2^40, got nan

// Optimizer hyperparameters outside their range name the option.
// RUN: not gptc compile --precision=fp32 %models/gpt2.mlir --model=tiny --compile-to=train-step --lr=nan 2>&1 | FileCheck %s --check-prefix=BADLR
// BADLR: error: gpt-insert-optimizer: lr must be a finite number > 0, got nan

// Tests `gptc explain` and `gptc compile --report`: a report read from the
// step.fb alone (runtime/executable/Report.h).

// RUN: rm -rf %t && gptc compile --precision=fp32 %models/gpt2.mlir --model=tiny --target=host -o %t.fb --dump-ir-after-each-pass=%t > /dev/null
// RUN: gptc explain %t.fb | FileCheck %s
// The policy and the loss scale are recorded as compiled.
// RUN: gptc compile %models/gpt2.mlir --model=tiny --target=host --precision=fp16 --loss-scale=1024 -o %t.fp16.fb > /dev/null
// RUN: gptc explain %t.fp16.fb | FileCheck %s --check-prefix=FP16
// FP16: precision: fp16, loss scale 1024; GEMM A operands: F16 x{{[0-9]+}}
// RUN: gptc compile %models/gpt2.mlir --model=tiny --target=host --precision=bf16 --narrow-residual -o %t.nr.fb > /dev/null
// RUN: gptc explain %t.nr.fb | FileCheck %s --check-prefix=NARROW
// NARROW: precision: bf16, narrow residual; GEMM A operands: BF16 x{{[0-9]+}}
// A decaying schedule in words, with what was compiled.
// RUN: gptc compile %models/gpt2.mlir --model=tiny --target=host --schedule=cosine --lr=6e-4 --min-lr=6e-5 --warmup-steps=10 --total-steps=100 --accum-steps=2 --beta2=0.99 --weight-decay=0 -o %t.cosine.fb > /dev/null
// RUN: gptc explain %t.cosine.fb | FileCheck %s --check-prefix=COSINE
// COSINE:      optimizer: AdamW in train_step
// COSINE-NEXT:   schedule: cosine, lr 0.0006 after 10 warm-up steps, decaying to min_lr 6e-05 by step 100 (and kept after it)
// COSINE-NEXT:   accum_steps = 2
// COSINE:        beta2 = 0.99
// COSINE:        weight_decay = 0
// COSINE-NEXT: memory (static plan
// CHECK-LABEL: executable: {{.*}}.fb
// CHECK-NEXT:    format version 1, written by gptc {{[0-9]+\.[0-9]+\.[0-9]+}}
// CHECK-NEXT:    target: host x86_64
// CHECK-LABEL: model: tiny
// CHECK:         n_embd = 16
// CHECK:         n_layer = 2
// CHECK:         parameters: 7,872 (31,488 B (30.8 KiB))
// CHECK-NEXT:    precision: fp32; GEMM A operands: F32 x{{[0-9]+}}
// CHECK-NEXT:    data parallel: any number of ranks (gptrun --gpus N; one skips the all-reduces)
// The defaults: a constant lr, AdamW's settings one a line.
// CHECK-NEXT:  optimizer: AdamW in train_step (gptrun --lr X scales the schedule)
// CHECK-NEXT:    schedule: constant, lr 0.0003
// CHECK-NEXT:    accum_steps = 1
// CHECK-NEXT:    beta1 = 0.9
// CHECK-NEXT:    beta2 = 0.95
// CHECK-NEXT:    epsilon = 1e-08
// CHECK-NEXT:    grad_clip = 1
// CHECK-NEXT:    loss_scale = 1
// CHECK-NEXT:    weight_decay = 0.1
// CHECK-LABEL: memory (static plan, every pool allocated once):
// CHECK-NEXT:    pool params: {{[0-9,]+}} B
// CHECK-NEXT:    pool state: {{[0-9,]+}} B
// CHECK-NEXT:    pool inputs: {{[0-9,]+}} B
// CHECK-NEXT:    pool activations: {{[0-9,]+}} B
// CHECK-NEXT:    pool workspace: {{[0-9,]+}} B
// CHECK-NEXT:    peak: {{[0-9,]+}} B
// CHECK:         Parameter: 28 tensors, 31,488 B
// CHECK:         OptimizerState: 56 tensors, 62,976 B
// CHECK-LABEL: program init:
// CHECK:         launches by kernel:
// CHECK-NEXT:       4  fill
// CHECK-NEXT:       1  random_normal
// CHECK-LABEL: program train_step:
// CHECK-NEXT:    tokens: 1 micro-batch of {{[0-9]+}} x {{[0-9]+}} a step
// CHECK-NEXT:    activations at their peak: linear_gelu f32 16.00 KiB x4, matmul f32 9.00 KiB x3, add_layernorm f32 8.00 KiB x8, {{.*}}, others {{.*}}
// CHECK-NEXT:    kernel launches: {{[0-9]+}} ({{[0-9]+}} distinct kernels)
// CHECK-NEXT:    gemms: {{[1-9][0-9]*}}
// CHECK-NEXT:    collectives: 2
// CHECK-NEXT:    events: 8 (record + wait)
// CHECK:         gemm epilogues: Bias x6, BiasGeluAux x2, DGelu x2, None x17
// CHECK:           1  adamw_multi
// CHECK-LABEL: program forward:
// CHECK:       fusion: none recorded
// CHECK-NEXT:  recompute: none (no --memory-budget)

// The counts are the compiler's own command list (commands.txt).
// RUN: awk '/^program train_step/{p=1;next} /^program/{p=0} p && $2=="launch"' %t/commands.txt | wc -l | sed 's/^ */launches /' > %t.dumped
// RUN: awk '/^program train_step/{p=1;next} /^program/{p=0} p && $2=="gemm"' %t/commands.txt | wc -l | sed 's/^ */gemms /' >> %t.dumped
// RUN: gptc explain %t.fb | awk '/^program train_step/{p=1;next} /^program/{p=0} p' | sed -n 's/^  kernel launches: \([0-9]*\).*/launches \1/p; s/^  gemms: /gemms /p' > %t.reported
// RUN: diff %t.dumped %t.reported

// --report prints the same report after writing the file.
// RUN: gptc compile --precision=fp32 %models/gpt2.mlir --model=tiny --target=host -o %t.report.fb --report | sed 's/\.report\.fb$/.fb/' > %t.compile-report
// RUN: gptc explain %t.fb > %t.explain-report
// RUN: diff %t.compile-report %t.explain-report

// Errors name the file or the flag.
// RUN: not gptc explain %t.missing.fb 2>&1 | FileCheck %s --check-prefix=MISSING
// MISSING: gptc: error: {{.*}}missing.fb: cannot open
// RUN: not gptc explain %models/gpt2.mlir 2>&1 | FileCheck %s --check-prefix=NOTFB
// NOTFB: gptc: error: {{.*}}gpt2.mlir: not a gptc executable
// RUN: not gptc explain 2>&1 | FileCheck %s --check-prefix=NOARG
// NOARG: gptc: error: explain: missing executable (gptc explain step.fb)
// RUN: not gptc explain %t.fb --model=tiny 2>&1 | FileCheck %s --check-prefix=FLAG
// FLAG: gptc: error: explain reads only the executable; --model applies to compile or run-reference
// RUN: not gptc explain %t.fb --lr=1 2>&1 | FileCheck %s --check-prefix=FLAG2
// FLAG2: gptc: error: explain reads only the executable; --lr applies to compile or run-reference
// RUN: not gptc compile --precision=fp32 %models/gpt2.mlir --model=tiny --report 2>&1 | FileCheck %s --check-prefix=REPORTIR
// REPORTIR: gptc: error: --report describes an executable: give -o FILE.fb

// Tests gptc --memory-budget: a budget below the plan recomputes values and
// records the plan in the executable; bad values and unreachable budgets
// are errors naming the flag or the budget.

// tiny at B=8, T=16 (fp32) plans 421.00 KiB (the logits' gradient in place
// of the logits); 0.0003 GiB is 314.57 KiB.
// RUN: gptc compile --precision=fp32 %models/gpt2.mlir --model=tiny --batch=8 --seq=16 --target=host --memory-budget=0.0003 -o %t.fb --report --progress=off 2>&1 | FileCheck %s --check-prefix=FIT
// FIT: remark: gpt-rematerialize: @train_step planned peak 421.00 KiB -> {{[0-9.]+}} KiB (budget 314.57 KiB, fitted to 313.00 KiB): recomputes {{[1-9][0-9]*}} values
// FIT: recompute (--memory-budget 314.6 KiB): {{[1-9][0-9]*}} values rebuilt by {{[1-9][0-9]*}} ops in the backward; planned peak 421.0 KiB -> {{[0-9.]+}} KiB, +{{[0-9.]+}}% FLOPs

// The IR carries the clones and the plan.
// RUN: gptc compile --precision=fp32 %models/gpt2.mlir --model=tiny --batch=8 --seq=16 --memory-budget=0.0003 --progress=off 2>/dev/null | FileCheck %s --check-prefix=IR
// IR: func.func @train_step
// IR-SAME: gpt.remat_plan = {budget = 322122
// IR: {gpt.offsets = {{.*}}, gpt.remat}

// Without a budget nothing is recomputed.
// RUN: gptc compile --precision=fp32 %models/gpt2.mlir --model=tiny --batch=8 --seq=16 --progress=off | FileCheck %s --check-prefix=OFF
// RUN: gptc compile --precision=fp32 %models/gpt2.mlir --model=tiny --batch=8 --seq=16 --memory-budget=0 --progress=off | FileCheck %s --check-prefix=OFF
// OFF-NOT: gpt.remat

// RUN: not gptc compile --precision=fp32 %models/gpt2.mlir --model=tiny --memory-budget=abc 2>&1 | FileCheck %s --check-prefix=BAD
// RUN: not gptc compile --precision=fp32 %models/gpt2.mlir --model=tiny --memory-budget=-1 2>&1 | FileCheck %s --check-prefix=BAD
// RUN: not gptc compile --precision=fp32 %models/gpt2.mlir --model=tiny --memory-budget=inf 2>&1 | FileCheck %s --check-prefix=BAD
// BAD: gptc: error: --memory-budget: expected a number of GiB >= 0 (0: off), got '{{.*}}'

// RUN: not gptc compile --precision=fp32 %models/gpt2.mlir --model=tiny --batch=8 --seq=16 --memory-budget=0.0001 --progress=off 2>&1 | FileCheck %s --check-prefix=UNREACHABLE
// UNREACHABLE: error: gpt-rematerialize: @train_step does not fit the memory budget of 104.86 KiB: the best plan found peaks at {{[0-9.]+}} KiB (from 421.00 KiB; arguments alone take 102.00 KiB) after recomputing {{[0-9]+}} values

// --remat-max-depth reaches the pass: at 1 every chain is one op (the
// default, 4, plans 5 values, one of them a GELU rebuilt from its linear's
// stored result); below 1 it is an error naming the flag.
// RUN: gptc compile --precision=fp32 %models/gpt2.mlir --model=tiny --batch=8 --seq=16 --memory-budget=0.0003 --remat-max-depth=1 --progress=off 2>&1 >/dev/null | FileCheck %s --check-prefix=DEPTH1
// DEPTH1: remark: gpt-rematerialize: @train_step planned peak 421.00 KiB -> {{[0-9.]+}} KiB (budget 314.57 KiB, fitted to 313.00 KiB): recomputes 7 values (7 ops: embed x1, layernorm x2, linear x4)
// DEPTH1-SAME: live at the peak: 102.{{[0-9]+}} KiB of arguments
// RUN: not gptc compile --precision=fp32 %models/gpt2.mlir --model=tiny --remat-max-depth=0 2>&1 | FileCheck %s --check-prefix=BADDEPTH
// BADDEPTH: gptc: error: --remat-max-depth: expected a number of ops >= 1, got 0

// --split-batch: where the budget would rebuild GEMMs (+15.2% FLOPs at one
// micro-batch of 8 rows), two micro-batches of 4 fit with no recomputed
// FLOPs; the step then takes (2, 4, 16) tokens. A budget the whole batch
// fits keeps one micro-batch.
// RUN: gptc compile --precision=fp32 %models/gpt2.mlir --model=tiny --batch=8 --seq=16 --memory-budget=0.0003 --split-batch --compile-to=memory-plan --progress=off 2>&1 | FileCheck %s --check-prefix=SPLIT
// SPLIT: gptc: --split-batch: 2 micro-batches of 4 rows a step (FLOPs recomputed per split: 1: +15.2%, 2: +0.0%)
// SPLIT: func.func @train_step
// SPLIT-SAME: tensor<2x4x16xi32> {gpt.input = "tokens"
// RUN: gptc compile --precision=fp32 %models/gpt2.mlir --model=tiny --batch=8 --seq=16 --memory-budget=1 --split-batch --compile-to=memory-plan --progress=off 2>&1 | FileCheck %s --check-prefix=NOSPLIT
// NOSPLIT: gptc: --split-batch: 1 micro-batch of 8 rows a step (FLOPs recomputed per split: 1: +0.0%)
// NOSPLIT: func.func @train_step
// NOSPLIT-SAME: tensor<1x8x16xi32> {gpt.input = "tokens"

// RUN: not gptc compile --precision=fp32 %models/gpt2.mlir --model=tiny --batch=8 --seq=16 --split-batch 2>&1 | FileCheck %s --check-prefix=SPLITNOBUDGET
// SPLITNOBUDGET: gptc: error: --split-batch: needs --memory-budget=GiB
// RUN: not gptc compile --precision=fp32 %models/gpt2.mlir --model=tiny --seq=16 --memory-budget=0.0003 --split-batch 2>&1 | FileCheck %s --check-prefix=SPLITNOBATCH
// SPLITNOBATCH: gptc: error: --split-batch: needs --batch=B
// RUN: not gptc compile --precision=fp32 %models/gpt2.mlir --model=tiny --batch=8 --seq=16 --memory-budget=0.00005 --split-batch 2>&1 | FileCheck %s --check-prefix=SPLITNONE
// SPLITNONE: gptc: error: --split-batch: no split of --batch=8 fits --memory-budget (tried 1: does not fit, 2: does not fit, 4: does not fit, 8: does not fit)

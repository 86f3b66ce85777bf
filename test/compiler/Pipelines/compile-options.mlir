// Tests that gpt-opt's phase pipelines take the compile options by gptc's
// flag names, with gptc's defaults and gptc's checks (CompileOptions::bind
// and ::resolve, compiler/Pipelines/CompileOptions.cpp), one behaviour per
// case. The model is models/gpt2.mlir's tiny preset.

// The precision policy defaults to gptc's, bf16: the forward's GEMM
// operands are bf16 casts of the fp32 master weights.
// RUN: gpt-opt %models/gpt2.mlir --gpt-import-pipeline=model=tiny --gpt-precision-pipeline | FileCheck %s --check-prefix=DEFAULT
// DEFAULT-LABEL: func.func @forward
// DEFAULT: gpt.cast {{.*}} : tensor<{{.*}}xf32> to tensor<{{.*}}xbf16>

// precision=fp32, as --precision=fp32: the model as written, no cast.
// RUN: gpt-opt %models/gpt2.mlir --gpt-import-pipeline=model=tiny '--gpt-precision-pipeline=precision=fp32' | FileCheck %s --check-prefix=FP32
// FP32-LABEL: func.func @forward
// FP32-NOT: bf16

// A name the policy does not have is refused, listing those it has.
// RUN: not gpt-opt %models/gpt2.mlir '--gpt-import-pipeline=model=tiny precision=fp4' 2>&1 | FileCheck %s --check-prefix=BADPOLICY
// BADPOLICY: for the --precision option: Cannot find option named 'fp4'

// The checks across options are gptc's: ZeRO-1 needs a world size.
// RUN: not gpt-opt %models/gpt2.mlir '--gpt-distribute-pipeline=zero=1' 2>&1 | FileCheck %s --check-prefix=ZERO
// ZERO: error: --zero=1: the optimizer state is cut into one shard per rank at compile time: give --world-size=N with N >= 2 (got --world-size=any)

// ... and the FP8 LM head needs the FP8 policy, in gpt-opt as in gptc.
// RUN: not gpt-opt %models/gpt2.mlir '--gpt-import-pipeline=model=tiny fp8-lm-head=true' 2>&1 | FileCheck %s --check-prefix=LMHEAD
// RUN: not gptc compile %models/gpt2.mlir --model=tiny --fp8-lm-head --compile-to=import 2>&1 | FileCheck %s --check-prefix=LMHEAD
// LMHEAD: --fp8-lm-head: needs --precision=fp8, got bf16

// gptc names an unknown policy with the names it takes.
// RUN: not gptc compile %models/gpt2.mlir --model=tiny --target=host --precision=fp4 2>&1 | FileCheck %s --check-prefix=GPTCPOLICY
// GPTCPOLICY: for the --precision option: expected fp32, bf16, fp16 or fp8, got 'fp4'

// The phase pipelines list the same options as gptc, under the same names.
// RUN: gpt-opt --help | FileCheck %s --check-prefix=HELP
// HELP: --gpt-fuse-pipeline
// HELP: --adam-epsilon=
// HELP: --world-size=
// HELP: --zero=

// The per-layer FP8 policy reaches gpt-mixed-precision by gptc's flag:
// tiny's two blocks are first and last, so no linear layer is FP8.
// RUN: gptc compile %models/gpt2.mlir --model=tiny --precision=fp8 --fp8-exclude=first,last --compile-to=precision | FileCheck %s --check-prefix=EXCLUDE
// EXCLUDE-LABEL: func.func @forward
// EXCLUDE-NOT: gpt.fp8_matmul
// EXCLUDE: gpt.linear {{.*}}bf16
// EXCLUDE-NOT: gpt.fp8_matmul
// RUN: not gptc compile %models/gpt2.mlir --model=tiny --fp8-exclude=last --compile-to=precision 2>&1 | FileCheck %s --check-prefix=EXCLUDEBF16
// EXCLUDEBF16: gptc: error: --fp8-exclude: needs --precision=fp8, got bf16

// Tests that gptc's --disable-patterns reaches each place of gpt-fuse-fp8
// in the pipeline: with the layernorm codes disabled, the steady step's
// residual layernorms stay layernorms read by casts.
// RUN: gptc compile %models/gpt2.mlir --model=tiny --precision=fp8 --disable-patterns=fp8-layernorm-codes --compile-to=fuse --progress=off | FileCheck %s --check-prefix=NOLNCODES
// RUN: gptc compile %models/gpt2.mlir --model=tiny --precision=fp8 --compile-to=fuse --progress=off | FileCheck %s --check-prefix=LNCODES
// NOLNCODES-LABEL: func.func @train_step(
// NOLNCODES-NOT: gpt.add_layernorm_fp8
// NOLNCODES-LABEL: func.func @train_step_first(
// LNCODES-LABEL: func.func @train_step(
// LNCODES: gpt.add_layernorm_fp8

// Tests that gptc checks the labels before compiling: an unknown one, one
// in both lists, the lists without fp8, and a list flag given twice.
// RUN: not gptc compile %models/gpt2.mlir --model=tiny --precision=fp8 --disable-patterns=fp8-layernorm 2>&1 | FileCheck %s --check-prefix=BADLABEL
// BADLABEL: gptc: error: --disable-patterns: no pattern 'fp8-layernorm' (the patterns: fp8-cross-entropy-grad, fp8-cast-gelu-grad, fp8-cast-column-sum, fp8-fold-input-cast, fp8-layernorm-codes, fp8-gelu-matmul-codes)
// RUN: not gptc compile %models/gpt2.mlir --model=tiny --precision=fp8 --enable-patterns=fp8-gelu-matmul-codes --disable-patterns=fp8-gelu-matmul-codes 2>&1 | FileCheck %s --check-prefix=BOTHLISTS
// BOTHLISTS: gptc: error: --enable-patterns and --disable-patterns both name 'fp8-gelu-matmul-codes'
// RUN: not gptc compile %models/gpt2.mlir --model=tiny --disable-patterns=fp8-layernorm-codes 2>&1 | FileCheck %s --check-prefix=PATTERNSBF16
// PATTERNSBF16: gptc: error: --disable-patterns: the patterns are FP8 rewrites; they need --precision=fp8, got bf16
// RUN: not gptc compile %models/gpt2.mlir --model=tiny --precision=fp8 --disable-patterns=fp8-layernorm-codes --disable-patterns=fp8-fold-input-cast 2>&1 | FileCheck %s --check-prefix=TWICE
// TWICE: gptc: error: --disable-patterns is given 2 times: give it once (a list takes its values comma-separated)

// Tests that gptc's --fp32-ops reaches gpt-mixed-precision: tiny's two
// attentions read fp32 under bf16; the executable's precision line names
// the choice; fp32 and an unknown kind are refused.
// RUN: gptc compile %models/gpt2.mlir --model=tiny --fp32-ops=attention --compile-to=precision --progress=off | FileCheck %s --check-prefix=FP32ATTN
// FP32ATTN-LABEL: func.func @forward
// FP32ATTN-COUNT-2: gpt.causal_attention {{.*}} : (tensor<2x8x48xf32>) -> (tensor<2x8x16xf32>,
// RUN: gptc compile %models/gpt2.mlir --model=mini --batch=2 --seq=64 --fp32-ops=attention --progress=off -o %t.fp32attn.fb
// RUN: gptc explain %t.fp32attn.fb | FileCheck %s --check-prefix=FP32ATTNEXE
// FP32ATTNEXE: precision: bf16, fp32 attention
// RUN: not gptc compile %models/gpt2.mlir --model=tiny --precision=fp32 --fp32-ops=attention 2>&1 | FileCheck %s --check-prefix=FP32ATTNFP32
// FP32ATTNFP32: gptc: error: --fp32-ops: needs --precision=bf16, fp16 or fp8 (every op is fp32 already)
// RUN: not gptc compile %models/gpt2.mlir --model=tiny --fp32-ops=softmax 2>&1 | FileCheck %s --check-prefix=FP32KIND
// FP32KIND: gptc: error: --fp32-ops: no kind 'softmax' (the kinds: attention)

// Tests of gptc's data-parallel step: one executable for any number of
// ranks by default, and gradient buckets issued during the backward in
// every precision.

// Without --world-size the step has its all-reduces and runs on any
// number of ranks: world_size 0 in the config and on each bucket.
// RUN: gptc compile %models/gpt2.mlir --model=tiny --precision=fp32 --compile-to=memory-plan --progress=off | FileCheck %s --check-prefix=ANY
// ANY: world_size = 0 : i64
// ANY-LABEL: func.func @train_step
// ANY: gpt.all_reduce mean {{.*}}world_size = 0 : i64

// --world-size=1 is one device: no collectives at all.
// RUN: gptc compile %models/gpt2.mlir --model=tiny --precision=fp32 --compile-to=memory-plan --world-size=1 --progress=off | FileCheck %s --check-prefix=ONE
// ONE-NOT: world_size
// ONE-LABEL: func.func @train_step
// ONE-NOT: gpt.all_reduce

// The summary line names the choice.
// RUN: gptc compile %models/gpt2.mlir --model=tiny --compile-to=memory-plan -o /dev/null 2>&1 | FileCheck %s --check-prefix=SAYANY
// SAYANY: gptc: model tiny, B=2, T=8, precision bf16 (default), any number of GPUs (gptrun --gpus N)
// RUN: gptc compile %models/gpt2.mlir --model=tiny --compile-to=memory-plan --world-size=4 -o /dev/null 2>&1 | FileCheck %s --check-prefix=SAYFOUR
// SAYFOUR: gptc: model tiny, B=2, T=8, precision bf16 (default), exactly 4 GPUs

// bf16 and fp8 widen each weight's gradient after the whole backward; the
// buckets reduce the narrow gradients where the backward wrote them, so
// the first gradient bucket (bucket 0 is the loss) is issued before both
// layers' attention gradients, long before the embedding's.
// RUN: gptc compile %models/gpt2.mlir --model=tiny --precision=bf16 --compile-to=memory-plan --bucket-mb=0.001 --progress=off | FileCheck %s --check-prefix=OVERLAP
// RUN: gptc compile %models/gpt2.mlir --model=tiny --precision=fp8 --compile-to=memory-plan --bucket-mb=0.001 --progress=off | FileCheck %s --check-prefix=OVERLAP
// OVERLAP-LABEL: func.func @train_step(
// OVERLAP: gpt.all_reduce mean %weight_grad, %bias_grad{{.*}}bucket = 1 : i64{{.*}}bf16
// OVERLAP: gpt.causal_attention_grad
// OVERLAP: gpt.causal_attention_grad
// OVERLAP: gpt.embed_grad

// The executable's command list (commands.txt) issues them so: the first
// gradient bucket's all-reduce goes to the comm stream before either
// layer's attention backward launches.
// RUN: rm -rf %t.dump && gptc compile %models/gpt2.mlir --model=tiny --precision=bf16 --bucket-mb=0.001 --dump-ir-after-each-pass=%t.dump --progress=off -o %t.fb
// RUN: awk '/^program train_step/{p=1;next} /^program/{p=0} p' %t.dump/commands.txt | FileCheck %s --check-prefix=COMMANDS
// COMMANDS: [comm] all_reduce mean %{{[0-9]+}}<>@activations+{{[0-9]+}}   // %{{[0-9]+}} = gpt.all_reduce
// COMMANDS: [comm] all_reduce mean %{{[0-9]+}}#0<16>
// COMMANDS: launch attention_backward_q
// COMMANDS: launch attention_backward_q
// COMMANDS: launch embed_backward

// Bad world sizes name the flag.
// RUN: not gptc compile %models/gpt2.mlir --model=tiny --compile-to=memory-plan --world-size=0 2>&1 | FileCheck %s --check-prefix=BADWORLD
// BADWORLD: gptc: error: --world-size: expected any or a number of ranks from 1 to 65536, got '0'
// BADWORLD-NOT: error

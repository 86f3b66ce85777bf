// Tests of gptc compile --compile-from=PHASE: IR that --compile-to=PHASE
// wrote records its phase and every option the passes ran with
// (gpt.phase, gpt.compile_options); compiling on from it gives what one
// compile gives, and an input or a flag that does not fit is refused.

// --compile-to records the phase and the options.
// RUN: gptc compile %models/gpt2.mlir --model=tiny --precision=fp8 --target=host --compile-to=schedule -o %t.schedule.mlir --progress=off
// RUN: FileCheck %s --check-prefix=RECORD < %t.schedule.mlir
// RECORD: module attributes {gpt.compile_options = {{{.*}}model = "tiny"{{.*}}precision = "fp8"{{.*}}target = "host"{{.*}}}{{.*}}gpt.phase = "schedule"

// From schedule to the memory plan: the IR of one compile, byte for byte.
// RUN: gptc compile %t.schedule.mlir --compile-from=schedule -o %t.two.mlir --progress=off
// RUN: gptc compile %models/gpt2.mlir --model=tiny --precision=fp8 --target=host -o %t.one.mlir --progress=off
// RUN: diff %t.one.mlir %t.two.mlir

// From the memory plan to the executable: the same step.fb, byte for byte.
// RUN: gptc compile %t.two.mlir --compile-from=memory-plan -o %t.two.fb --progress=off
// RUN: gptc compile %models/gpt2.mlir --model=tiny --precision=fp8 --target=host -o %t.one.fb --progress=off
// RUN: cmp %t.one.fb %t.two.fb

// A flag that shaped the IR cannot change on the way.
// RUN: not gptc compile %t.schedule.mlir --compile-from=schedule --precision=bf16 -o %t.x.mlir 2>&1 | FileCheck %s --check-prefix=CHANGED
// CHANGED: gptc: error: --precision=bf16: '{{.*}}.schedule.mlir' was compiled to schedule with precision=fp8, and --compile-from goes on with the options recorded in it (only codegen's flags may differ)

// ... but one that agrees with the record may be given.
// RUN: gptc compile %t.schedule.mlir --compile-from=schedule --precision=fp8 -o %t.same.mlir --progress=off
// RUN: diff %t.one.mlir %t.same.mlir

// The phase must be the one the IR is at.
// RUN: not gptc compile %t.schedule.mlir --compile-from=fuse -o %t.x.mlir 2>&1 | FileCheck %s --check-prefix=WRONGPHASE
// WRONGPHASE: gptc: error: --compile-from=fuse: '{{.*}}.schedule.mlir' is IR after phase schedule (its gpt.phase)

// A model file records no phase.
// RUN: not gptc compile %models/gpt2.mlir --compile-from=import -o %t.x.mlir 2>&1 | FileCheck %s --check-prefix=NORECORD
// NORECORD: gptc: error: --compile-from: '{{.*}}gpt2.mlir' records no phase and options (gpt.phase, gpt.compile_options): give it what gptc compile --compile-to=import wrote

// Nothing left to run is a mistake, not an empty compile.
// RUN: not gptc compile %t.schedule.mlir --compile-from=schedule --compile-to=lower -o %t.x.mlir 2>&1 | FileCheck %s --check-prefix=NOTHING
// NOTHING: gptc: error: --compile-from=schedule: nothing to do up to phase lower (--compile-to, or as -o says)

// The input is checked by the gate of its phase before anything runs: a
// program call left in the IR of phase lower is named.
// RUN: gptc compile %models/gpt2.mlir --model=tiny --precision=fp32 --target=host --compile-to=train-step -o %t.train-step.mlir --progress=off
// RUN: sed -e 's/gpt.phase = "train-step"/gpt.phase = "lower"/' %t.train-step.mlir > %t.fake-lower.mlir
// RUN: not gptc compile %t.fake-lower.mlir --compile-from=lower -o %t.x.mlir 2>&1 | FileCheck %s --check-prefix=GATE
// GATE: fake-lower.mlir:{{[0-9]+}}:{{[0-9]+}}: error: after phase lower: a call is left (programs are one graph each)

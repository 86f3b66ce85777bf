// Tests that compiling the same input twice (two processes) writes
// byte-identical executables, for both targets and both precisions: no
// pointer order, hash-map order, time or path leaks into step.fb.

// RUN: gptc compile --precision=fp32 %models/gpt2.mlir --model=tiny --target=host -o %t.host1.fb
// RUN: gptc compile --precision=fp32 %models/gpt2.mlir --model=tiny --target=host -o %t.host2.fb
// RUN: cmp %t.host1.fb %t.host2.fb

// RUN: gptc compile --precision=fp32 %models/gpt2.mlir --model=tiny -o %t.cuda1.fb
// RUN: gptc compile --precision=fp32 %models/gpt2.mlir --model=tiny -o %t.cuda2.fb
// RUN: cmp %t.cuda1.fb %t.cuda2.fb

// RUN: gptc compile %models/gpt2.mlir --model=tiny --precision=bf16 --accum-steps=2 -o %t.bf16a.fb
// RUN: gptc compile %models/gpt2.mlir --model=tiny --precision=bf16 --accum-steps=2 -o %t.bf16b.fb
// RUN: cmp %t.bf16a.fb %t.bf16b.fb

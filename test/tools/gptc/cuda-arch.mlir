// Tests that --cuda-arch picks the PTX version the chip needs, and that a
// chip or toolkit gptc cannot compile with is an error naming the flag before
// any pass runs, not an LLVM crash in the backend.

// sm_90 (the default) stays on PTX 8.0 (mini's head dimension, 16, is too
// small for the blocked wgmma kernels that would make it sm_90a).
// RUN: rm -rf %t.90 && gptc compile %models/gpt2.mlir --model=mini --batch=2 --seq=64 --precision=bf16 -o %t.90.fb --dump-ir-after-each-pass=%t.90
// RUN: FileCheck %s --check-prefix=SM90 < %t.90/kernels.ptx
// SM90: .version 8.0
// SM90: .target sm_90{{$}}
// SM90: mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32
// Every sm_90 kernel first waits for the grids before it (programmatic
// dependent launch; the runtime's --pdl): as many waits as kernels, and the
// first kernel's comes before its loads. sm_80's have no such instruction.
// RUN: grep -c "\.entry " %t.90/kernels.ptx > %t.90.entries
// RUN: grep -c "griddepcontrol.wait;" %t.90/kernels.ptx > %t.90.waits
// RUN: diff %t.90.entries %t.90.waits
// RUN: FileCheck %s --check-prefix=WAIT < %t.90/kernels.ptx
// WAIT-LABEL: .entry
// WAIT-NOT: ld.global
// WAIT: griddepcontrol.wait
// RUN: rm -rf %t.80 && gptc compile %models/gpt2.mlir --model=mini --batch=2 --seq=64 --precision=bf16 --cuda-arch=sm_80 -o %t.80.fb --dump-ir-after-each-pass=%t.80
// RUN: FileCheck %s --check-prefix=NOWAIT < %t.80/kernels.ptx
// NOWAIT: .target sm_80
// NOWAIT-NOT: griddepcontrol

// Consumer Blackwell needs PTX 8.7; its flash kernels use mma.sync.
// RUN: rm -rf %t.120 && gptc compile %models/gpt2.mlir --model=mini --batch=2 --seq=64 --precision=bf16 --cuda-arch=sm_120 -o %t.120.fb --dump-ir-after-each-pass=%t.120
// RUN: FileCheck %s --check-prefix=SM120 < %t.120/kernels.ptx
// SM120: .version 8.7
// SM120: .target sm_120
// SM120-NOT: wgmma
// SM120: mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32
// SM120-NOT: wgmma

// FP8 on sm_89 and newer: the conversions are cvt.rn.satfinite (two codes
// each), and a cast-transpose block stages its tile in shared memory and
// writes the transposed rows as 16-byte vectors.
// RUN: rm -rf %t.f8 && gptc compile %models/gpt2.mlir --model=mini --batch=2 --seq=64 --precision=fp8 -o %t.f8.fb --dump-ir-after-each-pass=%t.f8
// RUN: FileCheck %s --check-prefix=FP8 < %t.f8/kernels.ptx
// RUN: FileCheck %s --check-prefix=E4M3 < %t.f8/kernels.ptx
// RUN: FileCheck %s --check-prefix=E5M2 < %t.f8/kernels.ptx
// FP8-LABEL: .entry fp8_cast_transpose
// FP8-NOT: .entry
// FP8: ld.global.v4.b32
// FP8-NOT: .entry
// FP8: cvt.rn.satfinite.{{e4m3|e5m2}}x2.f32
// FP8-NOT: .entry
// FP8: st.global.v2.b32
// FP8-NOT: .entry
// FP8: bar.sync
// FP8-NOT: .entry
// FP8: st.global.v4.b32
// E4M3: cvt.rn.satfinite.e4m3x2.f32
// E5M2: cvt.rn.satfinite.e5m2x2.f32

// sm_86 has neither FP8 tensor cores nor the conversions: named before any
// pass runs.
// RUN: not gptc compile %models/gpt2.mlir --model=tiny --precision=fp8 --cuda-arch=sm_86 -o %t.f8old.fb 2>&1 | FileCheck %s --check-prefix=FP8OLD
// FP8OLD-NOT: gpt-instantiate-model
// FP8OLD: gptc: error: --precision=fp8: FP8 GEMMs and conversions need sm_89 or newer, but --cuda-arch is sm_86

// Older chips lack the bf16 tensor cores and cp.async the kernels use.
// RUN: not gptc compile --precision=fp32 %models/gpt2.mlir --model=tiny --cuda-arch=sm_75 -o %t.75.fb 2>&1 | FileCheck %s --check-prefix=OLD
// OLD-NOT: gpt-instantiate-model
// OLD: gptc: error: --cuda-arch: unsupported CUDA chip 'sm_75' (the kernels need sm_80 or newer: bf16 tensor cores, cp.async); expected one of sm_80,

// RUN: not gptc compile --precision=fp32 %models/gpt2.mlir --model=tiny --cuda-arch=hopper -o %t.bad.fb 2>&1 | FileCheck %s --check-prefix=BAD
// BAD: gptc: error: --cuda-arch: unsupported CUDA chip 'hopper'; expected one of sm_80, sm_86, sm_87, sm_89, sm_90, sm_90a,

// The Host target has no CUDA chip: --cuda-arch does not apply.
// RUN: gptc compile --precision=fp32 %models/gpt2.mlir --model=tiny --target=host --cuda-arch=hopper -o %t.host.fb

// A toolkit without libdevice is named before any pass runs.
// RUN: not gptc compile --precision=fp32 %models/gpt2.mlir --model=tiny --cuda-toolkit=%t.missing -o %t.x.fb 2>&1 | FileCheck %s --check-prefix=TOOLKIT
// TOOLKIT-NOT: gpt-instantiate-model
// TOOLKIT: gptc: error: --cuda-toolkit: no nvvm/libdevice/libdevice.10.bc in '{{.*}}missing' (--cuda-toolkit=DIR or $CUDA_HOME names the CUDA toolkit)

//===- ExecutableFuzzer.cpp - libFuzzer target: the step.fb loader --------===//
//
// Any bytes: Executable::loadBytes must accept or refuse them with a
// Status, never crash or read out of bounds; an accepted one is walked the
// way the runtime walks it (programs, commands, tensors).
//
//===----------------------------------------------------------------------===//

#include "runtime/executable/Executable.h"

#include <cstddef>
#include <cstdint>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  using namespace gptc;
  std::vector<uint8_t> bytes(data, data + size);
  // Nearly every mutation of a sealed seed breaks its checksum: reseal half
  // the inputs (those that verify and hold the field) so that the checks
  // behind the checksum stay fuzzed too.
  if (size % 2)
    (void)sealExecutable(bytes);
  StatusOr<Executable> exe = Executable::loadBytes(std::move(bytes), "fuzz");
  if (!exe)
    return 0;
  (void)exe->findProgram("train_step");
  uint64_t sum = 0;
  if (const auto *tensors = exe->get().tensors())
    for (const auto *t : *tensors)
      sum += t->size_bytes() / elementSize(t->dtype());
  if (const auto *programs = exe->get().programs())
    for (const auto *p : *programs)
      if (p->commands())
        sum += p->commands()->size();
  return sum == 1 ? 0 : 0;
}

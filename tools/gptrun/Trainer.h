//===- Trainer.h - gptrun's training loop ---------------------------------===//
//
// init once, zero the optimizer state, then train_step per step with
// batches from the data loader, and forward over validation batches.
// Progress goes to stdout, one line per step.
//
//===----------------------------------------------------------------------===//

#ifndef GPTC_TOOLS_GPTRUN_TRAINER_H
#define GPTC_TOOLS_GPTRUN_TRAINER_H

#include "tools/gptrun/Options.h"

namespace gptc::gptrun {

/// The whole run; an error says which file, program or tensor is at fault.
Status train(const Options &options);

} // namespace gptc::gptrun

#endif // GPTC_TOOLS_GPTRUN_TRAINER_H

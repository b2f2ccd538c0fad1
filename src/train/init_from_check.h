// `--init_from CKPT` starts a run from another run's weights, which fit only a model of the
// same structure over the same tokenizer. When they do not, say which part differs: the first
// tensor whose shape differs (both shapes), or the two tokenizers (a text read with another
// --tokenizer than the checkpoint's). Without --tokenizer the data is read with the
// checkpoint's own (train_command.cpp), and a text's character it lacks is named there.
#pragma once

#include <string>

#include "io/checkpoint.h"
#include "model/model_shape.h"

namespace folio {

// Empty when `checkpoint` fits a model of `run_shape` over `data_tokenizer` (the data's);
// otherwise what differs, in words, and how to mend it.
std::string init_from_mismatch(const LoadedCheckpoint& checkpoint, const ModelShape& run_shape,
                               const Tokenizer& data_tokenizer);

}  // namespace folio

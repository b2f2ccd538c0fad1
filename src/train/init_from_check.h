// `--init_from CKPT` starts a run from another run's weights, which fit only a model of the
// same structure over the same vocabulary. When they do not, say which part differs: the first
// tensor whose shape differs (both shapes), or the characters one vocabulary has and the other
// lacks.
#pragma once

#include <string>

#include "data/vocabulary.h"
#include "io/checkpoint.h"
#include "model/model_shape.h"

namespace folio {

// Empty when `checkpoint` fits a model of `run_shape` over `text_vocabulary`; otherwise what
// differs, in words.
std::string init_from_mismatch(const LoadedCheckpoint& checkpoint, const ModelShape& run_shape,
                               const Vocabulary& text_vocabulary);

}  // namespace folio

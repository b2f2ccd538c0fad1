#include "backend/cpu/dropout_masks.h"

namespace folio::cpu {

namespace {

size_t words_for(int width) { return (static_cast<size_t>(width) + 63) / 64; }

}  // namespace

MaskBits DropoutMasks::record(const DropoutSpec& dropout, int samples, int rows, int width) {
  Recording& recording = by_site_[dropout.purpose];
  recording.dropout = dropout;
  recording.samples = samples;
  recording.rows = rows;
  recording.width = width;
  recording.words.resize(static_cast<size_t>(samples) * rows * words_for(width));
  return MaskBits{recording.words.data(), words_for(width), rows};
}

MaskBits DropoutMasks::find(const DropoutSpec& dropout, int samples, int rows, int width) {
  const auto found = by_site_.find(dropout.purpose);
  if (found == by_site_.end()) return MaskBits{};
  Recording& recording = found->second;
  if (!draws_the_same_masks(recording.dropout, dropout) || recording.samples != samples ||
      recording.rows != rows || recording.width != width)
    return MaskBits{};
  return MaskBits{recording.words.data(), words_for(width), rows};
}

}  // namespace folio::cpu

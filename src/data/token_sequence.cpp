#include "data/token_sequence.h"

#include <algorithm>

#include "data/token_shards.h"

namespace folio {

TokenSequence::TokenSequence(std::span<const int32_t> ids) : size_(ids.size()) {
  parts_.push_back({.first = 0, .size = ids.size(), .ids = ids.data()});
}

TokenSequence::TokenSequence(const std::vector<const TokenFile*>& files) {
  for (const TokenFile* file : files) {
    parts_.push_back({.first = size_, .size = file->size(), .file = file});
    size_ += file->size();
  }
}

void TokenSequence::copy(size_t start, size_t count, int32_t* out) const {
  // The part that holds `start`: the last whose first position is not after it.
  auto part = std::upper_bound(parts_.begin(), parts_.end(), start,
                               [](size_t position, const Part& p) { return position < p.first; });
  --part;
  while (count > 0) {
    const size_t offset = start - part->first;
    const size_t n = std::min(count, part->size - offset);
    if (part->ids)
      std::copy_n(part->ids + offset, n, out);
    else
      part->file->copy_to(offset, n, out);
    out += n, start += n, count -= n;
    ++part;
  }
}

}  // namespace folio

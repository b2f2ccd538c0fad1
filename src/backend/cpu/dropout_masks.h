// A forward pass's dropout masks kept as bits for its backward pass, as PyTorch keeps its masks:
// the backward pass reads one bit an element instead of drawing it again with Philox, which was
// 7% of a shakespeare_char step (perf, bf16, 2 threads). A recording is found only by everything
// that decides a mask (the whole DropoutSpec and the shape), so a backward pass whose forward
// recorded nothing, or another step, draws the same masks again: the bits are a cache, never a
// second source of truth.
#pragma once

#include <cstddef>
#include <cstdint>
#include <unordered_map>
#include <vector>

#include "core/dropout_mask.h"

namespace folio::cpu {

// Where one dropout site's masks are, as rows: row r of sample b holds up to `width` elements in
// words_per_row 64-bit words of its own (rows never share a word, so threads write rows freely).
// words == nullptr: nothing recorded; draw the masks.
struct MaskBits {
  uint64_t* words = nullptr;
  size_t words_per_row = 0;
  int rows_per_sample = 0;

  bool recorded() const { return words != nullptr; }
  uint64_t* row(int sample, int row) const {
    return words + (static_cast<size_t>(sample) * rows_per_sample + row) * words_per_row;
  }
};

class DropoutMasks {
 public:
  // Room for the masks of `dropout` over `samples` x `rows` rows of up to `width` elements, which
  // the forward pass now fills, every row of it (a pass computing only some rows records none).
  MaskBits record(const DropoutSpec& dropout, int samples, int rows, int width);
  // The recording of exactly this dropout and shape, or an empty MaskBits.
  MaskBits find(const DropoutSpec& dropout, int samples, int rows, int width);

 private:
  struct Recording {
    DropoutSpec dropout;
    int samples = 0, rows = 0, width = 0;
    std::vector<uint64_t> words;
  };
  std::unordered_map<uint32_t, Recording> by_site_;  // by DropoutSpec::purpose: layer and site
};

}  // namespace folio::cpu

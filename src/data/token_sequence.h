// A split's tokens as the batch samplers read them: one long sequence of ids that is either the
// char ids in memory (int32) or memory-mapped token files (uint16 or uint32, several shards read
// as one sequence, a window may straddle two). Nothing is copied but the windows a batch takes,
// so a corpus of billions of tokens costs no memory beyond the page cache.
//
// A view: it points at storage that its owner (data/dataset.h) keeps alive.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace folio {

class TokenFile;

class TokenSequence {
 public:
  TokenSequence() = default;
  // Ids in memory (implicit: a span of char ids is a sequence).
  TokenSequence(std::span<const int32_t> ids);           // NOLINT(google-explicit-constructor)
  TokenSequence(const std::vector<int32_t>& ids)  // NOLINT(google-explicit-constructor)
      : TokenSequence(std::span<const int32_t>(ids)) {}
  // The files one after another, in this order.
  explicit TokenSequence(const std::vector<const TokenFile*>& files);

  size_t size() const { return size_; }
  // Copies ids start .. start + count - 1 into `out` (the caller keeps within size()).
  void copy(size_t start, size_t count, int32_t* out) const;

 private:
  // A stretch of the sequence: ids in memory, or one file.
  struct Part {
    size_t first = 0;  // its position in the sequence
    size_t size = 0;
    const int32_t* ids = nullptr;
    const TokenFile* file = nullptr;
  };
  std::vector<Part> parts_;
  size_t size_ = 0;
};

}  // namespace folio

// The text `folio prepare` tokenises, read a stretch at a time instead of whole: a FILE, or every
// regular file of a DIR (name order, hidden files skipped), each followed by <|endoftext|>, as
// nanoGPT's openwebtext preparation joins its documents. Only what a read asks for is in memory,
// so a corpus of tens of gigabytes is prepared in a few hundred megabytes (data/text_tokens.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace folio {

class CorpusReader {
 public:
  // `data` is a file or a folder; an unreadable file, or a folder with no files, is an Error.
  explicit CorpusReader(const std::string& data);

  // The corpus's bytes in all, the separators between documents included.
  uint64_t size() const { return size_; }
  // Appends bytes [offset, offset + count) of the corpus to `out` (fewer at its end).
  void read(uint64_t offset, size_t count, std::string& out) const;

 private:
  struct Part {
    std::string path;  // a file's bytes; empty: the separator after a document
    uint64_t start = 0, size = 0;
  };
  std::vector<Part> parts_;  // in corpus order, starts increasing
  uint64_t size_ = 0;
};

}  // namespace folio

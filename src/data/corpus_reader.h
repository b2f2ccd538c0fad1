// The text `folio prepare` tokenises, read a stretch at a time instead of whole: a FILE, or every
// regular file of a DIR and its subfolders (in the order of their paths inside DIR, hidden files
// and folders skipped), each followed by <|endoftext|>, as nanoGPT's openwebtext preparation
// joins its documents. Only what a read asks for is in memory, so a corpus of tens of gigabytes
// is prepared in a few hundred megabytes (data/text_tokens.h); a folder's documents cost their
// paths and 16 bytes each, held once. A FILE that is a pipe (`--data /dev/stdin`, `<(cat FILE)`)
// is the exception: it is held whole.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace folio {

class CorpusReader {
 public:
  // `data` is a file, a pipe or a folder; an unreadable file, a device (/dev/zero: it may never
  // end), or a folder with no files, is an Error.
  explicit CorpusReader(const std::string& data);

  // The corpus's bytes in all, the separators between documents included.
  uint64_t size() const { return size_; }
  // Appends bytes [offset, offset + count) of the corpus to `out` (fewer at its end).
  void read(uint64_t offset, size_t count, std::string& out) const;
  // `offset`, or where it falls inside a separator, the end of that separator: a cut there
  // would leave <|endoftext|> to neither side of it.
  uint64_t past_separator(uint64_t offset) const;
  // The sha256 of a FILE's bytes (of a pipe's, as they were read), which identifies the text a
  // run trained on.
  std::string file_sha256() const;

 private:
  // Document k: the file named names_[name_starts_[k], name_starts_[k + 1]) in folder_ (folder_
  // empty: a FILE, whose name is its path), its bytes from corpus byte starts_[k], then the
  // separator when separated_.
  std::string path_of(size_t k) const;

  std::string folder_, names_;
  std::vector<uint64_t> name_starts_;  // documents + 1 entries
  std::vector<uint64_t> starts_;       // documents + 1 entries: the last is size_
  bool separated_ = false;
  bool from_pipe_ = false;
  std::string piped_;  // a pipe's bytes (from_pipe_)
  uint64_t size_ = 0;
};

}  // namespace folio

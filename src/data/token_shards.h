// Token files: text tokenised once (folio prepare), read back by memory-mapping.
//
// Two layouts, both little-endian:
//   - nanoGPT's `train.bin` / `val.bin`: the token ids as raw uint16, nothing else;
//   - llm.c's shards (`train_000000.bin`, ...): a header of 256 int32 (header[0] the magic
//     number, header[1] the version, header[2] the number of tokens, the rest 0), then the ids.
//     GPT-2-sized vocabularies (up to 65,536 ids) use magic 20240520, version 1, uint16 ids;
//     larger ones use llm.c's own layout for them (its Llama 3 shards): magic 20240801,
//     version 7, uint32 ids.
// A file that is not what it should be (wrong magic, cut short, empty, an id the vocabulary
// does not have) is refused with one error that names the file and how to remake it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace folio {

inline constexpr int32_t kShardMagicUint16 = 20240520;
inline constexpr int32_t kShardVersionUint16 = 1;
inline constexpr int32_t kShardMagicUint32 = 20240801;
inline constexpr int32_t kShardVersionUint32 = 7;
inline constexpr size_t kShardHeaderInts = 256;

// The file `folio prepare` puts in its --out folder while it replaces the token files there (in
// a few renames, after writing the new ones aside): a folder that holds it is a mix of two
// preparations, and reading it as token files is refused.
inline constexpr const char* kPrepareIncompleteMarker = ".folio_prepare_incomplete";

enum class TokenFileLayout { kRawUint16, kShard };

// Writes `ids` (all below `vocab_size`) in `layout`; a raw uint16 file for a vocabulary over
// 65,536 ids is an error. Written to a temporary name and renamed, so a file is whole or absent.
void write_token_file(const std::string& path, TokenFileLayout layout,
                      std::span<const uint32_t> ids, size_t vocab_size);

// One token file, memory-mapped and checked (every id below `vocab_size`).
class TokenFile {
 public:
  TokenFile(const std::string& path, TokenFileLayout layout, size_t vocab_size);
  ~TokenFile();
  TokenFile(TokenFile&& other) noexcept;
  TokenFile(const TokenFile&) = delete;
  TokenFile& operator=(const TokenFile&) = delete;
  TokenFile& operator=(TokenFile&&) = delete;

  const std::string& path() const { return path_; }
  size_t size() const { return count_; }
  uint32_t operator[](size_t i) const { return wide_ ? wide_[i] : narrow_[i]; }
  // Tokens start .. start + count - 1 as int32 ids (what batches hold).
  void copy_to(size_t start, size_t count, int32_t* out) const;

 private:
  void check(TokenFileLayout layout, size_t vocab_size);  // the header, the size and every id

  std::string path_;
  void* mapping_ = nullptr;
  size_t mapped_bytes_ = 0;
  const uint16_t* narrow_ = nullptr;
  const uint32_t* wide_ = nullptr;
  size_t count_ = 0;
};

// The layout a file's name says: `..._NNNNNN.bin` is an llm.c shard, any other name nanoGPT's
// raw uint16.
TokenFileLayout layout_from_name(const std::string& path);

// The llm.c shards of `split` ("train" or "val") in folder `dir`, in name order
// (`<anything>_<split>_NNNNNN.bin` or `<split>_NNNNNN.bin`).
std::vector<std::string> shard_paths(const std::string& dir, const std::string& split);

}  // namespace folio

#include "data/token_shards.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <regex>
#include <utility>

#include "core/error.h"
#include "io/whole_file.h"

namespace folio {

namespace {

constexpr const char* kRemake =
    "remake it with folio prepare --data TEXT --tokenizer TOKENIZER --out DIR";

constexpr size_t kIdsPerWrite = size_t(1) << 20;  // write_token_file's bytes a write: 2-4 MiB

Error bad_file(const std::string& path, const std::string& problem) {
  return Error(path + ": " + problem + ": " + kRemake);
}

}  // namespace

void write_token_file(const std::string& path, TokenFileLayout layout,
                      std::span<const uint32_t> ids, size_t vocab_size) {
  const bool wide = vocab_size > 65536;
  if (wide && layout == TokenFileLayout::kRawUint16)
    throw Error("a vocabulary of " + std::to_string(vocab_size) +
                " ids does not fit nanoGPT's uint16 token files: use the llm.c shards");
  if (ids.size() > size_t(INT32_MAX)) throw Error("a shard holds at most 2^31 - 1 tokens");
  for (const uint32_t id : ids)
    if (id >= vocab_size)
      throw Error("token id " + std::to_string(id) + " is not below the vocabulary size " +
                  std::to_string(vocab_size));
  const size_t width = wide ? 4 : 2;
  write_file_atomically(path, [&](AtomicFileWriter& out) {
    if (layout == TokenFileLayout::kShard) {
      int32_t header[kShardHeaderInts] = {wide ? kShardMagicUint32 : kShardMagicUint16,
                                          wide ? kShardVersionUint32 : kShardVersionUint16,
                                          int32_t(ids.size())};
      out.write(reinterpret_cast<const char*>(header), sizeof(header));
    }
    // A few MiB at a time: a shard of 100M ids is not copied whole.
    std::vector<char> bytes;
    for (size_t first = 0; first < ids.size(); first += kIdsPerWrite) {
      const size_t count = std::min(kIdsPerWrite, ids.size() - first);
      bytes.resize(count * width);
      for (size_t i = 0; i < count; ++i) {
        if (wide) {
          std::memcpy(&bytes[4 * i], &ids[first + i], 4);
        } else {
          const uint16_t id = uint16_t(ids[first + i]);
          std::memcpy(&bytes[2 * i], &id, 2);
        }
      }
      out.write(bytes.data(), bytes.size());
    }
  });
}

TokenFile::TokenFile(const std::string& path, TokenFileLayout layout, size_t vocab_size)
    : path_(path) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) throw Error("cannot open the token file " + path + ": check the path");
  struct stat info {};
  ::fstat(fd, &info);
  mapped_bytes_ = size_t(info.st_size);
  if (mapped_bytes_ == 0) {
    ::close(fd);
    throw bad_file(path, "the file is empty");
  }
  mapping_ = ::mmap(nullptr, mapped_bytes_, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (mapping_ == MAP_FAILED) {
    mapping_ = nullptr;
    throw Error("cannot memory-map " + path + ": check that it is a regular file");
  }
  try {
    check(layout, vocab_size);
  } catch (...) {
    ::munmap(mapping_, mapped_bytes_);
    throw;
  }
}

void TokenFile::check(TokenFileLayout layout, size_t vocab_size) {
  const std::string& path = path_;
  const char* bytes = static_cast<const char*>(mapping_);
  size_t body = 0;
  bool wide = false;
  if (layout == TokenFileLayout::kRawUint16) {
    if (mapped_bytes_ % 2 != 0)
      throw bad_file(
          path, "an odd number of bytes, so it is cut short (nanoGPT's .bin holds uint16 ids)");
    count_ = mapped_bytes_ / 2;
  } else {
    if (mapped_bytes_ < kShardHeaderInts * 4)
      throw bad_file(path, "cut short: " + std::to_string(mapped_bytes_) +
                               " bytes, less than the 1024-byte header of an llm.c shard");
    int32_t header[3];
    std::memcpy(header, bytes, sizeof(header));
    if (header[0] == kShardMagicUint16 && header[1] == kShardVersionUint16)
      wide = false;
    else if (header[0] == kShardMagicUint32 && header[1] == kShardVersionUint32)
      wide = true;
    else if (header[0] != kShardMagicUint16 && header[0] != kShardMagicUint32)
      throw bad_file(path, "wrong magic number " + std::to_string(header[0]) +
                               " (an llm.c token shard starts with 20240520 or 20240801), so it "
                               "is not a token shard");
    else
      throw bad_file(path, "unknown version " + std::to_string(header[1]) + " for magic " +
                               std::to_string(header[0]) + " (known: 20240520 v1, 20240801 v7)");
    if (header[2] <= 0) throw bad_file(path, "the header says it holds no tokens (empty shard)");
    count_ = size_t(header[2]);
    body = kShardHeaderInts * 4;
    const size_t expected = body + count_ * (wide ? 4 : 2);
    if (mapped_bytes_ < expected)
      throw bad_file(path, "truncated: its header promises " + std::to_string(count_) +
                               " tokens (" + std::to_string(expected) + " bytes) but it has " +
                               std::to_string(mapped_bytes_) + " bytes");
    if (mapped_bytes_ > expected)
      throw bad_file(path, std::to_string(mapped_bytes_ - expected) +
                               " bytes more than its header's " + std::to_string(count_) +
                               " tokens");
  }
  if (wide)
    wide_ = reinterpret_cast<const uint32_t*>(bytes + body);
  else
    narrow_ = reinterpret_cast<const uint16_t*>(bytes + body);
  for (size_t i = 0; i < count_; ++i)
    if ((*this)[i] >= vocab_size)
      throw Error(path + ": token " + std::to_string(i) + " has id " + std::to_string((*this)[i]) +
                  ", not below the vocabulary size " + std::to_string(vocab_size) +
                  ": the file was made with another tokenizer; remake it with folio prepare "
                  "--tokenizer (the model's tokenizer)");
}

void TokenFile::copy_to(size_t start, size_t count, int32_t* out) const {
  if (wide_)
    std::copy_n(wide_ + start, count, out);  // ids are checked below vocab_size <= 2^24
  else
    std::copy_n(narrow_ + start, count, out);
}

TokenFile::~TokenFile() {
  if (mapping_ != nullptr) ::munmap(mapping_, mapped_bytes_);
}

TokenFile::TokenFile(TokenFile&& other) noexcept
    : path_(std::move(other.path_)),
      mapping_(std::exchange(other.mapping_, nullptr)),
      mapped_bytes_(other.mapped_bytes_),
      narrow_(other.narrow_),
      wide_(other.wide_),
      count_(other.count_) {}

TokenFileLayout layout_from_name(const std::string& path) {
  static const std::regex shard(".*_[0-9]+\\.bin");
  return std::regex_match(std::filesystem::path(path).filename().string(), shard)
             ? TokenFileLayout::kShard
             : TokenFileLayout::kRawUint16;
}

std::vector<std::string> shard_paths(const std::string& dir, const std::string& split) {
  const std::regex name("(.*_)?" + split + "_[0-9]+\\.bin");
  std::vector<std::string> paths;
  if (!std::filesystem::is_directory(dir)) return paths;
  for (const auto& entry : std::filesystem::directory_iterator(dir))
    if (entry.is_regular_file() && std::regex_match(entry.path().filename().string(), name))
      paths.push_back(entry.path().string());
  std::sort(paths.begin(), paths.end());
  return paths;
}

}  // namespace folio

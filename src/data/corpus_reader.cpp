#include "data/corpus_reader.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string_view>

#include "core/error.h"
#include "core/sha256.h"
#include "data/text_dataset.h"
#include "io/whole_file.h"
#include "tokenizer/tokenizer_files.h"

namespace folio {

namespace fs = std::filesystem;

namespace {

constexpr const char* kCheckData = "check the path (--data FILE|DIR)";
constexpr std::string_view kSeparator = kEndOfText;

uint64_t size_of(const std::string& path) {
  std::error_code error;
  const uint64_t size = fs::file_size(path, error);
  if (error) throw Error("cannot read " + path + ": " + kCheckData);
  return size;
}

}  // namespace

CorpusReader::CorpusReader(const std::string& data) {
  std::vector<std::string> names;
  if (fs::is_directory(data)) {
    folder_ = data;
    separated_ = true;
    // Subfolders too (text is often kept one level down, by source or by author; they had been
    // skipped in silence), but not hidden files or folders, nor folder links (a link to a
    // folder above would never end).
    for (auto entry = fs::recursive_directory_iterator(data); entry != fs::end(entry); ++entry) {
      if (entry->path().filename().string()[0] == '.') {
        entry.disable_recursion_pending();
        continue;
      }
      if (entry->is_regular_file())
        names.push_back(fs::relative(entry->path(), data).generic_string());
    }
    std::sort(names.begin(), names.end());  // an order that is the same on every machine
    if (names.empty()) throw Error("the folder " + data + " has no files: put text files in it");
  } else {
    refuse_device(data, "data file ", "pass --data a text file, a folder of them, or a pipe");
    std::error_code error;
    if (fs::exists(data, error) && !fs::is_regular_file(data, error)) {
      // A pipe cannot be read twice nor at an offset: held whole, as the character path holds
      // every text.
      piped_ = read_whole_file(data, kCheckData);
      from_pipe_ = true;
    }
    names.push_back(data);
  }
  const uint64_t separator = separated_ ? kSeparator.size() : 0;
  for (std::string& name : names) {
    name_starts_.push_back(names_.size());
    starts_.push_back(size_);
    size_ += (from_pipe_ ? piped_.size()
                         : size_of(folder_.empty() ? name : (fs::path(folder_) / name).string())) +
             separator;
    names_ += name;
    std::string().swap(name);  // each name is held once
  }
  name_starts_.push_back(names_.size());
  starts_.push_back(size_);
  if (!separated_) {
    std::string first_bytes;
    read(0, 12, first_bytes);
    refuse_checkpoint_or_shard(first_bytes, data);
  }
}

std::string CorpusReader::path_of(size_t k) const {
  const std::string name = names_.substr(name_starts_[k], name_starts_[k + 1] - name_starts_[k]);
  return folder_.empty() ? name : (fs::path(folder_) / name).string();
}

uint64_t CorpusReader::past_separator(uint64_t offset) const {
  if (!separated_ || offset >= size_) return offset;
  // Document k holds `offset`; its separator is the last bytes before starts_[k + 1].
  const size_t k =
      size_t(std::upper_bound(starts_.begin(), starts_.end(), offset) - starts_.begin()) - 1;
  const uint64_t separator_start = starts_[k + 1] - kSeparator.size();
  return offset > separator_start ? starts_[k + 1] : offset;
}

std::string CorpusReader::file_sha256() const {
  return from_pipe_ ? sha256_hex(piped_) : sha256_file_hex(path_of(0));
}

void CorpusReader::read(uint64_t offset, size_t count, std::string& out) const {
  if (from_pipe_) {
    if (offset < piped_.size()) out.append(piped_, size_t(offset), count);
    return;
  }
  const uint64_t separator = separated_ ? kSeparator.size() : 0;
  // The document that holds `offset`, then on through the documents until `count` is read.
  size_t k = size_t(std::upper_bound(starts_.begin(), starts_.end(), offset) - starts_.begin());
  for (k = k == 0 ? 0 : k - 1; k + 1 < starts_.size() && count > 0; ++k) {
    const uint64_t from = offset - starts_[k];
    const uint64_t file_bytes = starts_[k + 1] - starts_[k] - separator;
    if (from < file_bytes) {  // the file's bytes
      const std::string path = path_of(k);
      const size_t take = size_t(std::min<uint64_t>(count, file_bytes - from));
      std::ifstream in(path, std::ios::binary);
      const size_t before = out.size();
      out.resize(before + take);
      if (!in.seekg(std::streamoff(from)) || !in.read(out.data() + before, std::streamsize(take)))
        throw Error("cannot read " + path +
                    " (it changed or went while being read): " + kCheckData);
      offset += take;
      count -= take;
    }
    if (count > 0 && separator > 0) {  // the separator after it
      const uint64_t into = offset - starts_[k] - file_bytes;
      const size_t take = size_t(std::min<uint64_t>(count, separator - into));
      out.append(kSeparator.substr(size_t(into), take));
      offset += take;
      count -= take;
    }
  }
}

}  // namespace folio

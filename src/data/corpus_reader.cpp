#include "data/corpus_reader.h"

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "tokenizer/tokenizer_files.h"

namespace folio {

namespace fs = std::filesystem;

namespace {

constexpr const char* kCheckData = "check the path (--data FILE|DIR)";

uint64_t size_of(const std::string& path) {
  std::error_code error;
  const uint64_t size = fs::file_size(path, error);
  if (error) throw Error("cannot read " + path + ": " + kCheckData);
  return size;
}

}  // namespace

CorpusReader::CorpusReader(const std::string& data) {
  const auto add = [&](std::string path, uint64_t size) {
    parts_.push_back(Part{std::move(path), size_, size});
    size_ += size;
  };
  if (!fs::is_directory(data)) {
    add(data, size_of(data));
    return;
  }
  std::vector<std::string> files;
  for (const auto& entry : fs::directory_iterator(data))
    if (entry.is_regular_file() && entry.path().filename().string()[0] != '.')
      files.push_back(entry.path().string());
  std::sort(files.begin(), files.end());
  if (files.empty()) throw Error("the folder " + data + " has no files: put text files in it");
  for (const std::string& file : files) {
    add(file, size_of(file));
    add("", std::string_view(kEndOfText).size());
  }
}

void CorpusReader::read(uint64_t offset, size_t count, std::string& out) const {
  // The first part that ends after `offset`, then on through the parts until `count` is read.
  auto part = std::upper_bound(parts_.begin(), parts_.end(), offset,
                               [](uint64_t at, const Part& p) { return at < p.start + p.size; });
  for (; part != parts_.end() && count > 0; ++part) {
    const uint64_t from = offset - part->start;
    const size_t take = size_t(std::min<uint64_t>(count, part->size - from));
    if (part->path.empty()) {
      out.append(std::string_view(kEndOfText).substr(size_t(from), take));
    } else {
      std::ifstream in(part->path, std::ios::binary);
      const size_t before = out.size();
      out.resize(before + take);
      if (!in.seekg(std::streamoff(from)) || !in.read(out.data() + before, std::streamsize(take)))
        throw Error("cannot read " + part->path +
                    " (it changed or went while being read): " + kCheckData);
    }
    offset += take;
    count -= take;
  }
}

}  // namespace folio

// Whole files, for the commands that read a text or a tokenizer file at once and write token
// files and tokenizers.
#pragma once

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>

#include "core/error.h"

namespace folio {

// The bytes of `path`; an unreadable file is an Error naming it, then `fix`.
inline std::string read_whole_file(const std::string& path, const std::string& fix) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("cannot read " + path + ": " + fix);
  std::ostringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

// Writes `bytes` to `path` through `path`.partial, renamed when whole: a file is complete or
// absent, and a full disk is one clear error.
inline void write_whole_file(const std::string& path, const std::string_view bytes) {
  const std::string partial = path + ".partial";
  std::FILE* file = std::fopen(partial.c_str(), "wb");
  if (file == nullptr) throw Error("cannot write " + path + ": check the folder and permissions");
  const bool written = std::fwrite(bytes.data(), 1, bytes.size(), file) == bytes.size();
  if (std::fclose(file) != 0 || !written) {
    std::filesystem::remove(partial);
    throw Error("writing " + path + " failed (is the disk full?): free space and run again");
  }
  std::filesystem::rename(partial, path);
}

}  // namespace folio

// Whole files, for the commands that read a text or a tokenizer file at once and write token
// files and tokenizers.
#pragma once

#include <fstream>
#include <sstream>
#include <string>
#include <string_view>

#include "core/error.h"
#include "io/safetensors.h"

namespace folio {

// The bytes of `path`; an unreadable file is an Error naming it, then `fix`.
inline std::string read_whole_file(const std::string& path, const std::string& fix) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("cannot read " + path + ": " + fix);
  std::ostringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

// Writes `bytes` to `path` as checkpoints are written (write_file_atomically: a temporary file,
// fsynced, renamed over `path`): after a crash or a full disk, `path` is complete or as it was.
inline void write_whole_file(const std::string& path, const std::string_view bytes) {
  write_file_atomically(path, [&](AtomicFileWriter& out) { out.write(bytes.data(), bytes.size()); });
}

}  // namespace folio

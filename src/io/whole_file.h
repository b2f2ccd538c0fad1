// Whole files, for the commands that read a text or a tokenizer file at once and write token
// files and tokenizers.
#pragma once

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>

#include "core/error.h"
#include "io/safetensors.h"

namespace folio {

// Refuses `path` when it is a device (/dev/zero, /dev/urandom, a terminal, a disk): one may never
// end, and reading it whole would fill memory before anything could be said (`--data /dev/zero`
// had read until "out of memory"). A pipe ends when its writer does, so it is read as it comes.
// The Error names the file as `what` + `path`, then `fix`.
inline void refuse_device(const std::string& path, const std::string& what,
                          const std::string& fix) {
  std::error_code error;
  const std::filesystem::file_type type = std::filesystem::status(path, error).type();
  if (type == std::filesystem::file_type::character || type == std::filesystem::file_type::block)
    throw Error(what + path + " is a device, not a file, and may never end: " + fix);
}

// The bytes of `path` (a pipe's as they come); an unreadable file, a device (refuse_device), or a
// folder (which an ifstream opens and reads as empty on Linux), is an Error naming it, then `fix`.
inline std::string read_whole_file(const std::string& path, const std::string& fix) {
  std::error_code error;
  if (std::filesystem::is_directory(path, error))
    throw Error(path + " is a folder, not a file: " + fix);
  refuse_device(path, "", fix);
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

// Refuses to write over what is at `path` unless `force`: a file there may be a good checkpoint or
// a run's training state, which a mistyped output option must not destroy. `option` names what
// chose the path ("--out"), for the fix. A folder there is refused even with `force`.
inline void check_new_output_file(const std::string& path, bool force, const std::string& option) {
  std::error_code error;
  if (std::filesystem::is_directory(path, error))
    throw Error(path + " is a folder: give " + option + " a file name");
  if (!force && std::filesystem::exists(path, error))
    throw Error(path + " exists: pass --force to replace it, or choose another " + option);
}

// Makes the folder `path` (and its parents) for a command's output, or says why it cannot and
// which option chose it (`option`: "--out_dir", "--out DIR").
inline void make_output_folder(const std::string& path, const std::string& option) {
  std::error_code error;
  std::filesystem::create_directories(path, error);
  if (!std::filesystem::is_directory(path))
    throw Error("cannot create the folder " + path + " (" +
                (error ? error.message() : "a file is there") + "): give " + option +
                " a folder you can write");
}

}  // namespace folio

// Building and taking apart safetensors files byte by byte, for the tests of damaged and hostile
// checkpoints.
#pragma once

#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>

#include <nlohmann/json.hpp>

namespace folio::testing {

inline std::string read_all(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>());
}

// A raw safetensors file from a header text and data bytes.
inline std::string raw_file(const std::string& header, const std::string& data) {
  std::string file(8, '\0');
  const uint64_t size = header.size();
  std::memcpy(file.data(), &size, 8);
  return file + header + data;
}

// A well-formed file's parsed header and its data section.
struct SafetensorsParts {
  nlohmann::json header;
  std::string data;
};

inline SafetensorsParts split_safetensors(const std::string& bytes) {
  uint64_t size;
  std::memcpy(&size, bytes.data(), 8);
  return {nlohmann::json::parse(bytes.substr(8, size)), bytes.substr(8 + size)};
}

// The file again without folio's checksums, so that a test's edit meets the structural checks.
inline std::string join_unchecked(SafetensorsParts parts) {
  parts.header["__metadata__"].erase("data_sha256");
  parts.header["__metadata__"].erase("header_sha256");
  return raw_file(parts.header.dump(), parts.data);
}

}  // namespace folio::testing

// SHA-256 (FIPS 180-4), for checking downloaded data and for checkpoint checksums.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace folio {

class Sha256 {
 public:
  Sha256();
  void update(const void* data, size_t size);
  std::array<uint8_t, 32> digest();  // finishes the hash; call once
  std::string hex_digest();

 private:
  void compress(const uint8_t* block);
  uint32_t state_[8];
  uint8_t buffer_[64];
  size_t buffered_ = 0;
  uint64_t total_bytes_ = 0;
};

std::string sha256_hex(std::string_view bytes);
std::string sha256_file_hex(const std::string& path);  // throws folio::Error if unreadable

}  // namespace folio

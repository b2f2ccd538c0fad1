// SHA-256 (FIPS 180-4), for checking downloaded data and for checkpoint checksums: OpenSSL's
// libcrypto computes it (EVP interface), folio only turns the digest into hex.
#pragma once

#include <memory>
#include <string>
#include <string_view>

namespace folio {

// A running SHA-256 over bytes fed in pieces (a file's data section read in chunks).
class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(Sha256&&) noexcept;
  Sha256& operator=(Sha256&&) noexcept;
  void update(const void* data, size_t size);
  std::string hex_digest();  // ends the hash

 private:
  struct Context;
  std::unique_ptr<Context> context_;
};

std::string sha256_hex(std::string_view bytes);
std::string sha256_file_hex(const std::string& path);  // throws folio::Error if unreadable

}  // namespace folio

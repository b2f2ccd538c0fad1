// SHA-256 (FIPS 180-4), for checking downloaded data and for checkpoint checksums: OpenSSL's
// libcrypto computes it (EVP interface), folio only turns the digest into hex.
#pragma once

#include <string>
#include <string_view>

namespace folio {

std::string sha256_hex(std::string_view bytes);
std::string sha256_file_hex(const std::string& path);  // throws folio::Error if unreadable

}  // namespace folio

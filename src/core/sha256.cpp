#include "core/sha256.h"

#include <openssl/evp.h>

#include <fstream>
#include <memory>
#include <vector>

#include "core/error.h"

namespace folio {

// OpenSSL's running hash; EVP_MD_CTX_free when it goes.
struct Sha256::Context {
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> evp{EVP_MD_CTX_new(), &EVP_MD_CTX_free};
};

Sha256::Sha256() : context_(std::make_unique<Context>()) {
  if (!context_->evp || EVP_DigestInit_ex(context_->evp.get(), EVP_sha256(), nullptr) != 1)
    throw Error("internal: OpenSSL could not start a SHA-256 hash");
}
Sha256::~Sha256() = default;
Sha256::Sha256(Sha256&&) noexcept = default;
Sha256& Sha256::operator=(Sha256&&) noexcept = default;

void Sha256::update(const void* data, size_t size) {
  if (size > 0 && EVP_DigestUpdate(context_->evp.get(), data, size) != 1)
    throw Error("internal: OpenSSL's SHA-256 update failed");
}

std::string Sha256::hex_digest() {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  if (EVP_DigestFinal_ex(context_->evp.get(), digest, &length) != 1)
    throw Error("internal: OpenSSL's SHA-256 final step failed");
  static const char* digits = "0123456789abcdef";
  std::string hex;
  for (unsigned int i = 0; i < length; ++i)
    hex += digits[digest[i] >> 4], hex += digits[digest[i] & 15];
  return hex;
}

std::string sha256_hex(std::string_view bytes) {
  Sha256 hash;
  hash.update(bytes.data(), bytes.size());
  return hash.hex_digest();
}

std::string sha256_file_hex(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  if (!file) throw Error("cannot read " + path);
  Sha256 hash;
  std::vector<char> chunk(1 << 16);
  while (file) {
    file.read(chunk.data(), static_cast<std::streamsize>(chunk.size()));
    hash.update(chunk.data(), static_cast<size_t>(file.gcount()));
  }
  return hash.hex_digest();
}

}  // namespace folio

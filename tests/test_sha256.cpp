// SHA-256 through OpenSSL against the FIPS 180-4 example vectors, and the file form against the
// string form across the 64 KiB chunks sha256_file_hex reads.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "core/sha256.h"

namespace folio {
namespace {

TEST(Sha256, MatchesTheStandardsExamples) {
  EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(sha256_hex(std::string(1000000, 'a')),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(Sha256, OfAFileEqualsOfItsBytes) {
  const std::string path =
      (std::filesystem::temp_directory_path() / "folio_sha256_test.bin").string();
  std::string bytes;
  for (int i = 0; i < 200000; ++i) bytes += static_cast<char>(i * 7 % 251);  // > 3 chunks
  std::ofstream(path, std::ios::binary) << bytes;
  EXPECT_EQ(sha256_file_hex(path), sha256_hex(bytes));
  std::filesystem::remove(path);
  EXPECT_THROW(sha256_file_hex(path), Error);
}

}  // namespace
}  // namespace folio

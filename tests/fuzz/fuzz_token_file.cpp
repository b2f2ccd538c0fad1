// libFuzzer target: token files (folio prepare's output, nanoGPT's train.bin, llm.c's shards). The
// first byte picks the layout the name would say (raw uint16 or llm.c shard, whose magic number
// then says uint16 or uint32 ids) and the next three the vocabulary size (1 to 2^24); the rest is
// the file, written to disk because TokenFile maps a path. A refusal must be one folio::Error
// naming the file; a file that loads must be exactly its header and its ids, hold only ids below
// the vocabulary size, and give them back through copy_to.
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "data/token_shards.h"
#include "fuzz_checks.h"

namespace {

using folio::fuzz::check;
using folio::fuzz::check_message;

constexpr size_t kLongestMessage = 1000;

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 4) return 0;
  const bool shard = data[0] % 2 == 1;
  const size_t vocabulary = (size_t(data[1]) | size_t(data[2]) << 8 | size_t(data[3]) << 16) + 1;
  const std::string_view file(reinterpret_cast<const char*>(data) + 4, size - 4);
  const std::string path = "/tmp/folio_fuzz_token_file_" + std::to_string(getpid()) + ".bin";
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(file.data(), static_cast<std::streamsize>(file.size()));
  }
  try {
    const folio::TokenFile tokens(
        path, shard ? folio::TokenFileLayout::kShard : folio::TokenFileLayout::kRawUint16,
        vocabulary);
    check(tokens.size() > 0);
    const size_t header = shard ? folio::kShardHeaderInts * sizeof(int32_t) : 0;
    check(file.size() >= header);
    const size_t id_bytes = (file.size() - header) / tokens.size();
    check(id_bytes == 2 || id_bytes == 4);
    check(header + tokens.size() * id_bytes == file.size());
    std::vector<int32_t> copied(tokens.size());
    tokens.copy_to(0, tokens.size(), copied.data());
    for (size_t i = 0; i < tokens.size(); ++i) {
      check(tokens[i] < vocabulary);
      check(copied[i] == static_cast<int32_t>(tokens[i]));
    }
  } catch (const folio::Error& error) {
    check_message(error, kLongestMessage);
    check(std::string_view(error.what()).find(path) != std::string_view::npos);
  }
  return 0;
}

// libFuzzer target: tokenizer files. The first byte picks the layout: a Hugging Face
// tokenizer.json (read_tokenizer_json_text), or GPT-2's / HF's two files, vocab.json and
// merges.txt, split at the first NUL byte and written to files (read_vocab_and_merges reads
// paths). A refusal, there or when the tokenizer is built, must be one folio::Error. A tokenizer
// that loads is then held to what byte-level BPE promises: every id it gives is in its vocabulary,
// any byte string (the input itself, and a fixed hostile text) decodes back to itself with and
// without its special tokens, and the tokenizer.json folio writes for it reads back as the same
// definition.
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "fuzz_checks.h"
#include "tokenizer/byte_level_bpe.h"
#include "tokenizer/tokenizer_files.h"

namespace {

using folio::fuzz::check;
using folio::fuzz::check_message;

// File names and token texts are quoted in messages; the texts go through printable().
constexpr size_t kLongestMessage = 2000;

// Contractions, digit and space runs, combining marks, emoji, a special token's text, bytes that
// are not UTF-8 and a NUL: what the pre-tokeniser's pattern and the byte alphabet must all take.
const std::string& hostile_text() {
  static const std::string text =
      "Hello, I'm 12345 ok\n\n   spaces\t<|endoftext|>e\xCC\x81 \xF0\x9F\x91\x8D\xF0\x9F\x8F\xBD "
      "\xFF\xFE\xC3 they'll\r\n" +
      std::string(1, '\0') + "end";
  return text;
}

void check_round_trip(const folio::ByteLevelBpe& bpe, std::string_view text) {
  for (bool allow_special : {false, true}) {
    const std::vector<folio::TokenId> ids = bpe.encode(text, allow_special);
    for (folio::TokenId id : ids) check(id < bpe.vocab_size());
    check(bpe.decode(ids) == text);
  }
}

// The tokenizer.json folio writes reads back to the same merges, pattern and options, and encodes
// as this one does. (Where two ids share a text as the file spells it, such as a special token
// spelled as another token's bytes, the file keeps one entry, as a JSON object must, with the last
// id: then only the round trip is required.)
void check_written_back(const folio::ByteLevelBpe& bpe) {
  const folio::BpeDefinition& definition = bpe.definition();
  const folio::BpeDefinition read =
      folio::read_tokenizer_json_text(folio::tokenizer_json_text(definition), "written back");
  check(read.merges == definition.merges && read.pattern == definition.pattern &&
        read.ignore_merges == definition.ignore_merges);
  std::set<std::string> texts;
  size_t used = 0;
  std::vector<bool> special(definition.tokens.size(), false);
  for (folio::TokenId id : definition.specials) special[id] = true;
  for (size_t id = 0; id < definition.tokens.size(); ++id) {
    if (!definition.used[id]) continue;
    ++used;
    // as the file spells it: a special token as its text, any other in the byte alphabet
    texts.insert(special[id] ? definition.tokens[id]
                             : folio::bytes_to_alphabet(definition.tokens[id]));
  }
  const folio::ByteLevelBpe rebuilt(read);
  check_round_trip(rebuilt, hostile_text());
  if (texts.size() == used) {
    check(read.used == definition.used && read.tokens == definition.tokens);
    check(rebuilt.encode(hostile_text(), true) == bpe.encode(hostile_text(), true));
  }
}

// One pair of files a process (libFuzzer runs inputs one after another in it).
std::string scratch_path(const char* name) {
  return "/tmp/folio_fuzz_tokenizer_" + std::to_string(getpid()) + "_" + name;
}

void write_file(const std::string& path, std::string_view bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const bool two_files = data[0] % 2 == 1;
  const std::string_view rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  try {
    folio::BpeDefinition definition;
    if (two_files) {
      const size_t nul = rest.find('\0');
      const std::string vocab_path = scratch_path("vocab.json");
      const std::string merges_path = scratch_path("merges.txt");
      write_file(vocab_path, rest.substr(0, nul));
      write_file(merges_path, nul == std::string_view::npos ? "" : rest.substr(nul + 1));
      definition = folio::read_vocab_and_merges(vocab_path, merges_path);
    } else {
      definition = folio::read_tokenizer_json_text(std::string(rest), "fuzz.json");
    }
    const folio::ByteLevelBpe bpe(definition);
    check(bpe.vocab_size() == definition.tokens.size());
    check_round_trip(bpe, hostile_text());
    check_round_trip(bpe, rest.substr(0, 512));
    check_written_back(bpe);
  } catch (const folio::Error& error) {
    check_message(error, kLongestMessage);
  }
  return 0;
}

// libFuzzer target: a data file's bytes through UTF-8 decoding, the vocabulary, encoding, the
// train/val split and check_dataset_fits, and a checkpoint's vocabulary string through
// Vocabulary::from_utf8_symbols. The first three bytes pick train_fraction and block_size.
// Beyond "no crash, no undefined behaviour, only folio::Error", every success is checked:
// strict UTF-8 reads back byte for byte, token ids decode to the text, the split covers it.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "core/error.h"
#include "data/text_dataset.h"
#include "data/utf8.h"
#include "data/vocabulary.h"
#include "fuzz_checks.h"

namespace {

using folio::fuzz::check;
using folio::fuzz::check_message;

void check_decoding(const std::string& bytes) {
  folio::Utf8Problem problem{};
  const auto strict = folio::decode_utf8(bytes, &problem, /*translate_newlines=*/false);
  if (!strict) {
    check(problem.byte_offset < bytes.size() && !problem.what.empty());
    return;
  }
  check(folio::encode_utf8(*strict) == bytes);
  const auto translated = folio::decode_utf8(bytes, nullptr);
  check(translated &&
        std::find(translated->begin(), translated->end(), U'\r') == translated->end());
}

void check_dataset(const std::string& bytes, double train_fraction, int block_size) {
  const folio::TextDataset dataset =
      folio::text_dataset_from_bytes(bytes, "fuzz.txt", train_fraction);
  const auto text = folio::decode_utf8(bytes, nullptr);
  check(text && dataset.tokens.size() == text->size());
  check(dataset.vocabulary.size() > 0);
  for (int32_t id : dataset.tokens) check(id >= 0 && id < dataset.vocabulary.size());
  check(dataset.vocabulary.decode(dataset.tokens) == folio::encode_utf8(*text));
  check(dataset.train().size() + dataset.val().size() == dataset.tokens.size());
  // The vocabulary survives the trip through a checkpoint's metadata.
  const std::string symbols = dataset.vocabulary.symbols_utf8();
  check(folio::Vocabulary::from_utf8_symbols(symbols).symbols() == dataset.vocabulary.symbols());
  try {
    folio::check_dataset_fits(dataset, block_size);
    check(dataset.train().size() > static_cast<size_t>(block_size) &&
          dataset.val().size() > static_cast<size_t>(block_size));
  } catch (const folio::Error& error) {
    check_message(error);
  }
}

// The bytes as a checkpoint's vocabulary, then encoding the same bytes as text with it.
void check_stored_vocabulary(const std::string& bytes) {
  const folio::Vocabulary vocabulary = folio::Vocabulary::from_utf8_symbols(bytes);
  check(std::adjacent_find(vocabulary.symbols().begin(), vocabulary.symbols().end(),
                           [](char32_t a, char32_t b) { return a >= b; }) ==
        vocabulary.symbols().end());
  const folio::TextDataset dataset =
      folio::text_dataset_from_bytes(bytes, "fuzz.txt", 0.5, &vocabulary);
  for (int32_t id : dataset.tokens) check(id >= 0 && id < vocabulary.size());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 3) return 0;
  const double train_fraction = data[0] / 256.0;  // the config's range [0, 1)
  const int block_size = 1 + (data[1] | (data[2] << 8)) % 512;
  const std::string bytes(reinterpret_cast<const char*>(data) + 3, size - 3);
  check_decoding(bytes);
  try {
    check_dataset(bytes, train_fraction, block_size);
  } catch (const folio::Error& error) {
    check_message(error);
  }
  try {
    check_stored_vocabulary(bytes);
  } catch (const folio::Error& error) {
    check_message(error);
  }
  return 0;
}

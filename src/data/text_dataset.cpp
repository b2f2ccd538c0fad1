#include "data/text_dataset.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/error.h"
#include "core/sha256.h"
#include "data/utf8.h"

namespace folio {

TextDataset load_text_dataset(const std::string& path, double train_fraction,
                              const Vocabulary* vocabulary) {
  std::error_code error;
  if (!std::filesystem::exists(path, error))
    throw Error("data file " + path + " does not exist: pass --data FILE with a UTF-8 text file");
  if (std::filesystem::is_directory(path, error))
    throw Error("data file " + path + " is a directory: pass --data FILE with a UTF-8 text file");
  std::ifstream file(path, std::ios::binary);
  if (!file) throw Error("cannot open data file " + path + ": check its permissions");
  std::ostringstream buffer;
  buffer << file.rdbuf();
  return text_dataset_from_bytes(buffer.str(), path, train_fraction, vocabulary);
}

TextDataset text_dataset_from_bytes(const std::string& bytes, const std::string& path,
                                    double train_fraction, const Vocabulary* vocabulary) {
  if (bytes.empty())
    throw Error("data file " + path + " is empty: pass --data FILE with some text to train on");

  Utf8Problem problem;
  auto text = decode_utf8(bytes, &problem);
  if (!text)
    throw Error("data file " + path + " is not valid UTF-8 (" + problem.what + " at byte " +
                std::to_string(problem.byte_offset) + "): convert it to UTF-8, e.g. with iconv");

  TextDataset dataset;
  dataset.path = path;
  dataset.file_sha256 = sha256_hex(bytes);
  dataset.vocabulary = vocabulary != nullptr ? *vocabulary : Vocabulary::from_text(*text);
  dataset.tokens = dataset.vocabulary.encode(*text, "data file " + path);
  dataset.train_size = static_cast<size_t>(train_fraction * static_cast<double>(text->size()));
  return dataset;
}

void check_dataset_fits(const TextDataset& dataset, int block_size) {
  const size_t needed = static_cast<size_t>(block_size) + 1;
  const size_t train = dataset.train().size(), val = dataset.val().size();
  if (train < needed || val < needed)
    throw Error("data file " + dataset.path + " is too short: " +
                std::to_string(dataset.tokens.size()) + " characters give a train split of " +
                std::to_string(train) + " and a val split of " + std::to_string(val) +
                ", and each needs at least block_size + 1 = " + std::to_string(needed) +
                "; use a longer text or a smaller --block_size");
}

}  // namespace folio

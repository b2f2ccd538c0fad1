#include "data/text_dataset.h"

#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include "core/error.h"
#include "core/sha256.h"
#include "data/token_shards.h"
#include "data/utf8.h"
#include "io/safetensors.h"
#include "io/whole_file.h"

namespace folio {

TextDataset load_text_dataset(const std::string& path, double train_fraction,
                              const Vocabulary* vocabulary, const DataProgress& on_progress) {
  std::error_code error;
  if (!std::filesystem::exists(path, error))
    throw Error("data file " + path + " does not exist: pass --data FILE with a UTF-8 text file");
  if (std::filesystem::is_directory(path, error))
    throw Error("data file " + path + " is a directory: pass --data FILE with a UTF-8 text file");
  refuse_device(path, "data file ",
                "pass --data FILE with a UTF-8 text file (a pipe, such as <(cat FILE), works too)");
  std::ifstream file(path, std::ios::binary);
  if (!file) throw Error("cannot open data file " + path + ": check its permissions");
  const uintmax_t size = std::filesystem::file_size(path, error);
  std::string bytes;
  if (!error) bytes.reserve(static_cast<size_t>(size));
  std::vector<char> chunk(size_t(1) << 20);  // a progress report per MiB
  while (file) {
    file.read(chunk.data(), static_cast<std::streamsize>(chunk.size()));
    bytes.append(chunk.data(), static_cast<size_t>(file.gcount()));
    if (on_progress && size > 0) on_progress(0.5 * double(bytes.size()) / double(size));
  }
  return text_dataset_from_bytes(bytes, path, train_fraction, vocabulary, on_progress);
}

namespace {

// The folder to name in place of the token file `path`: --data takes a folder of them.
std::string folder_of(const std::string& path) {
  const std::string folder = std::filesystem::path(path).parent_path().string();
  return folder.empty() ? "." : folder;
}

}  // namespace

void refuse_checkpoint_or_shard(std::string_view first_bytes, const std::string& path) {
  // A safetensors file: an 8-byte little-endian header length, then a JSON object.
  if (first_bytes.size() > 8 && first_bytes[8] == '{' &&
      safetensors_header_length(first_bytes.data()) <= kSafetensorsMaxHeaderBytes)
    throw Error("data file " + path +
                " is a checkpoint (safetensors), not a text: start a run from it with "
                "--init_from " + path + ", continue its run with --resume DIR, or give it to "
                "eval and sample as --ckpt " + path + "; --data takes the text to train on");
  int32_t magic = 0, version = 0;
  if (first_bytes.size() >= 8) {
    std::memcpy(&magic, first_bytes.data(), 4);
    std::memcpy(&version, first_bytes.data() + 4, 4);
  }
  if ((magic == kShardMagicUint16 && version == kShardVersionUint16) ||
      (magic == kShardMagicUint32 && version == kShardVersionUint32))
    throw Error("data file " + path +
                " is a token file (llm.c's shard layout), not a text: pass the folder that holds "
                "the train and val token files, --data " + folder_of(path));
}

TextDataset text_dataset_from_bytes(const std::string& bytes, const std::string& path,
                                    double train_fraction, const Vocabulary* vocabulary,
                                    const DataProgress& on_progress) {
  const auto report = [&](double fraction) {
    if (on_progress) on_progress(fraction);
  };
  if (bytes.empty())
    throw Error("data file " + path + " is empty: pass --data FILE with some text to train on");

  refuse_checkpoint_or_shard(std::string_view(bytes).substr(0, 12), path);
  Utf8Problem problem;
  auto text = decode_utf8(bytes, &problem);
  // nanoGPT's train.bin and val.bin (folio prepare writes them too) have no header: raw uint16
  // ids, which are seldom UTF-8. A text named .bin that is UTF-8 is read as one.
  if (!text && std::filesystem::path(path).extension() == ".bin")
    throw Error("data file " + path +
                " is not UTF-8 text but likely a token file (nanoGPT's raw ids, as folio prepare "
                "writes them): pass the folder that holds train.bin and val.bin, --data " +
                folder_of(path));
  if (!text)
    throw Error("data file " + path + " is not valid UTF-8 (" + problem.what + " at byte " +
                std::to_string(problem.byte_offset) + "): convert it to UTF-8, e.g. with iconv");

  report(0.65);
  TextDataset dataset;
  dataset.path = path;
  dataset.file_sha256 = sha256_hex(bytes);
  report(0.75);
  dataset.vocabulary = vocabulary != nullptr ? *vocabulary : Vocabulary::from_text(*text);
  report(0.85);
  dataset.tokens = dataset.vocabulary.encode(*text, "data file " + path);
  report(1.0);
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

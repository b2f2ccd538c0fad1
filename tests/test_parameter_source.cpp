// Checkpoints loaded as sampling loads them: the header read, then each tensor read from the file
// in chunks and written into the model at its place (ParameterSource). The parameters must be
// those of the whole-file loader bit for bit: the model's own for fp32 files, and for F16, BF16
// and F64 files the values their bits mean, decoded here independently of the loader. Damage found
// on reading (a flipped bit, a file cut short, even after it was opened) names the file.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>

#include <nlohmann/json.hpp>

#include "core/sha256.h"
#include "io/checkpoint.h"
#include "io/parameter_source.h"
#include "io/safetensors.h"
#include "model/gpt.h"
#include "safetensors_bytes.h"
#include "test_helpers.h"

namespace folio {
namespace {

using testing::error_message;
using testing::read_all;
using testing::TempDir;

// 20000 tokens x 128 wide: the token embedding (2.56M values) spans the loader's 4 MiB chunks in
// every dtype; padded to 20032 rows, which must read back as zeros.
Config wide_config() {
  Config config;
  config.n_layer = 2, config.n_head = 2, config.n_embd = 128, config.block_size = 8;
  config.vocab_padding = 64;
  return config;
}

const Vocabulary& wide_vocabulary() {
  static const Vocabulary vocabulary = [] {
    std::u32string text;
    for (char32_t c = 0x4E00; c < 0x4E00 + 20000; ++c) text += c;
    return Vocabulary::from_text(text);
  }();
  return vocabulary;
}

// Equal bit for bit (EXPECT_EQ on floats would let -0 equal 0).
void expect_same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  ASSERT_EQ(a.size(), b.size());
  size_t first_difference = a.size();
  for (size_t i = 0; i < a.size() && first_difference == a.size(); ++i)
    if (std::memcmp(&a[i], &b[i], sizeof(float)) != 0) first_difference = i;
  EXPECT_EQ(first_difference, a.size()) << a[first_difference] << " vs " << b[first_difference];
}

struct SavedModel {
  std::unique_ptr<Backend> backend = make_backend("cpu", 1);
  std::unique_ptr<GPT> model;
  std::string path;
};

SavedModel save_wide_model(const TempDir& dir) {
  SavedModel saved;
  saved.model = std::make_unique<GPT>(
      *saved.backend, ModelShape::from_config(wide_config(), wide_vocabulary().size()));
  saved.model->initialize(5, 0.02, false);
  saved.path = dir.file("ckpt.safetensors");
  save_checkpoint(saved.path, *saved.model, wide_config(), wide_vocabulary(), 1, 2, 3);
  return saved;
}

TEST(ParameterSource, AnFp32FileFillsTheModelWithItsOwnParameters) {
  TempDir dir;
  const SavedModel saved = save_wide_model(dir);
  const std::vector<float> expected = saved.model->read_parameters();
  const LoadedCheckpoint loaded = load_checkpoint(saved.path, Config{}, nullptr);
  EXPECT_EQ(loaded.parameters->count(), expected.size());
  // Into a model whose memory holds something else, padding rows included: every value must be
  // written, the padding as zeros.
  GPT model(*saved.backend, loaded.shape);
  model.write_parameters(std::vector<float>(model.parameter_count(), 7.0f));
  loaded.parameters->write_into(model);
  expect_same_bits(model.read_parameters(), expected);
  expect_same_bits(loaded.parameters->read_all(), expected);
}

// The value of F16 and BF16 bits, from the formats' definitions (not the loader's code).
float half_value(uint16_t bits) {
  const int sign = bits >> 15, exponent = (bits >> 10) & 31, mantissa = bits & 1023;
  const double magnitude =
      exponent == 0 ? std::ldexp(mantissa, -24) : std::ldexp(1024 + mantissa, exponent - 25);
  return static_cast<float>(sign ? -magnitude : magnitude);
}
float bfloat_value(uint16_t bits) {
  const int sign = bits >> 15, exponent = (bits >> 7) & 255, mantissa = bits & 127;
  const double magnitude =
      exponent == 0 ? std::ldexp(mantissa, -133) : std::ldexp(128 + mantissa, exponent - 134);
  return static_cast<float>(sign ? -magnitude : magnitude);
}

// The checkpoint's tensors re-encoded as `dtype` with random finite values, written with the same
// metadata (its data checksum recomputed), and an F32 file of the values they mean.
void write_as(const std::string& checkpoint, const std::string& dtype, const std::string& path,
              const std::string& reference_path) {
  const SafetensorsFile file = SafetensorsFile::read(checkpoint);
  std::mt19937 random(42);
  nlohmann::json header;
  std::string data;
  std::vector<std::vector<float>> values;
  for (const SafetensorsTensor& tensor : file.tensors()) {
    std::vector<float> meant(tensor.element_count());
    const size_t begin = data.size();
    for (float& value : meant) {
      if (dtype == "F64") {
        const double d = std::ldexp(static_cast<double>(random()) - 2147483648.0, -40);
        data.append(reinterpret_cast<const char*>(&d), 8);
        value = static_cast<float>(d);
        continue;
      }
      uint16_t bits;
      do bits = static_cast<uint16_t>(random());  // not Inf nor NaN: all ones in the exponent
      while (dtype == "F16" ? ((bits >> 10) & 31) == 31 : ((bits >> 7) & 255) == 255);
      data.append(reinterpret_cast<const char*>(&bits), 2);
      value = dtype == "F16" ? half_value(bits) : bfloat_value(bits);
    }
    header[tensor.name] = {
        {"dtype", dtype}, {"shape", tensor.shape}, {"data_offsets", {begin, data.size()}}};
    values.push_back(std::move(meant));
  }
  std::map<std::string, std::string> metadata = file.metadata();
  metadata.erase("header_sha256");
  metadata["data_sha256"] = sha256_hex(data);
  header["__metadata__"] = metadata;
  std::string header_text = header.dump();
  header_text.append((8 - header_text.size() % 8) % 8, ' ');
  std::ofstream(path, std::ios::binary) << testing::raw_file(header_text, data);
  std::vector<TensorToWrite> tensors;
  for (size_t i = 0; i < file.tensors().size(); ++i)
    tensors.push_back({file.tensors()[i].name, file.tensors()[i].shape, values[i].data()});
  metadata.erase("data_sha256");
  write_safetensors(reference_path, tensors, metadata);
}

TEST(ParameterSource, F16Bf16AndF64FilesGiveTheValuesTheirBitsMean) {
  TempDir dir;
  const SavedModel saved = save_wide_model(dir);
  for (const char* dtype : {"F16", "BF16", "F64"}) {
    const std::string path = dir.file(std::string(dtype) + ".safetensors");
    const std::string reference = dir.file(std::string(dtype) + "_values.safetensors");
    write_as(saved.path, dtype, path, reference);
    const LoadedCheckpoint loaded = load_checkpoint(path, Config{}, nullptr);
    ASSERT_EQ(SafetensorsFile::read(path).find("ln_f.weight")->dtype, dtype);
    const std::vector<float> expected =
        load_checkpoint(reference, Config{}, nullptr).parameters->read_all();
    GPT model(*saved.backend, loaded.shape);
    model.write_parameters(std::vector<float>(model.parameter_count(), 7.0f));
    loaded.parameters->write_into(model);
    SCOPED_TRACE(dtype);
    expect_same_bits(model.read_parameters(), expected);
  }
}

TEST(ParameterSource, DamageFoundOnReadingTheFileNamesIt) {
  TempDir dir;
  const SavedModel saved = save_wide_model(dir);
  const std::string good = read_all(saved.path);
  // One flipped bit of the data section (the last byte: a bias).
  std::string flipped = good;
  flipped.back() = static_cast<char>(flipped.back() ^ 4);
  const std::string flipped_path = dir.write("flipped.safetensors", flipped);
  // Its header is sound: the damage is found on the one pass that reads the values.
  const LoadedCheckpoint damaged = load_checkpoint(flipped_path, Config{}, nullptr);
  std::string message = error_message([&] { damaged.parameters->read_all(); });
  EXPECT_NE(message.find("checkpoint " + flipped_path +
                         " is damaged: its tensor data does not match the checksum stored in "
                         "it: re-download it or use another checkpoint"),
            std::string::npos)
      << message;
  // Cut short by one byte.
  const std::string cut = dir.write("cut.safetensors", good.substr(0, good.size() - 1));
  message = error_message([&] { load_checkpoint(cut, Config{}, nullptr); });
  EXPECT_NE(message.find(cut), std::string::npos) << message;
  EXPECT_NE(message.find("truncated"), std::string::npos) << message;
  // Cut short after it was opened and checked, before its values were read.
  const std::string shrinking = dir.write("shrinking.safetensors", good);
  const LoadedCheckpoint loaded = load_checkpoint(shrinking, Config{}, nullptr);
  std::filesystem::resize_file(shrinking, good.size() / 2);
  message = error_message([&] { loaded.parameters->read_all(); });
  EXPECT_NE(message.find("checkpoint " + shrinking +
                         " is not a valid safetensors file: it ended "
                         "while being read"),
            std::string::npos)
      << message;
}

// A small model with a tied head, saved to dir/tied.safetensors (which holds the head twice, as
// PyTorch's state_dict does).
void save_tied_model(const TempDir& dir) {
  Config config;
  config.n_layer = 1, config.n_head = 2, config.n_embd = 4, config.block_size = 4;
  config.tie_weights = true;
  const Vocabulary vocabulary = Vocabulary::from_text(U"abcdef");
  auto backend = make_backend("cpu", 1);
  GPT model(*backend, ModelShape::from_config(config, vocabulary.size()));
  model.initialize(3, 0.02, false);
  save_checkpoint(dir.file("tied.safetensors"), model, config, vocabulary, 1, 1, 1);
}

// A tied head is stored twice (as PyTorch's state_dict holds it): the copy must equal the
// embedding, compared as the values are read.
TEST(ParameterSource, ATiedHeadThatDiffersFromTheEmbeddingIsRefused) {
  TempDir dir;
  save_tied_model(dir);
  // The lowest bit of the copy's first value flipped, the checksums dropped.
  testing::SafetensorsParts parts =
      testing::split_safetensors(read_all(dir.file("tied.safetensors")));
  parts.data[parts.header["lm_head.weight"]["data_offsets"][0].get<size_t>()] ^= 1;
  dir.write("untied.safetensors", testing::join_unchecked(parts));
  const LoadedCheckpoint loaded =
      load_checkpoint(dir.file("untied.safetensors"), Config{}, nullptr);
  const std::string message = error_message([&] { loaded.parameters->read_all(); });
  EXPECT_NE(message.find("lm_head.weight differs from token_embedding_table.weight, but the "
                         "config ties them"),
            std::string::npos)
      << message;
}

// The file is read once: opening it reads the header alone, and the data checksum is checked on
// the pass that writes the values into the model. A byte changed after opening (before that
// pass) is found by it, so the values a model gets are the bytes that were checked; the model
// written from them is then not to be used, which the commands ensure by ending on the error.
TEST(ParameterSource, TheDataChecksumIsCheckedOnThePassThatReadsTheValues) {
  TempDir dir;
  const SavedModel saved = save_wide_model(dir);
  const LoadedCheckpoint loaded = load_checkpoint(saved.path, Config{}, nullptr);
  const std::string good = read_all(saved.path);
  {
    std::fstream file(saved.path, std::ios::in | std::ios::out | std::ios::binary);
    file.seekp(static_cast<std::streamoff>(good.size() / 2));  // the middle of the data section
    file.put(static_cast<char>(good[good.size() / 2] ^ 0x10));
  }
  GPT model(*saved.backend, loaded.shape);
  const std::string message = error_message([&] { loaded.parameters->write_into(model); });
  EXPECT_EQ(message.rfind("checkpoint " + saved.path +
                              " is damaged: its tensor data does not match the checksum stored "
                              "in it: re-download it or use another checkpoint (or another "
                              "program saved it again with folio's metadata: save it without "
                              "the entries header_sha256 and data_sha256",
                          0),
            0u)
      << message;
}

// A flipped bit that turns a weight into a NaN is damage, and is named as such (the data
// checksum is checked at the end of the pass that met the NaN), not as a NaN the model holds.
TEST(ParameterSource, ANaNMadeByDamageIsReportedAsDamage) {
  TempDir dir;
  const SavedModel saved = save_wide_model(dir);
  testing::SafetensorsParts parts = testing::split_safetensors(read_all(saved.path));
  const size_t header_size = read_all(saved.path).size() - parts.data.size();
  const size_t at = header_size + parts.header["ln_f.weight"]["data_offsets"][0].get<size_t>();
  std::string damaged = read_all(saved.path);
  damaged[at + 3] = static_cast<char>(damaged[at + 3] | 0x7F);  // sign and exponent bits: ±Inf or
  damaged[at + 2] = static_cast<char>(damaged[at + 2] | 0x80);  // NaN, whatever the value was
  const std::string path = dir.write("nan.safetensors", damaged);
  const LoadedCheckpoint loaded = load_checkpoint(path, Config{}, nullptr);
  const std::string message = error_message([&] { loaded.parameters->read_all(); });
  EXPECT_NE(message.find(path + " is damaged: its tensor data does not match"), std::string::npos)
      << message;
}

// A tied head stored before the embedding it copies (the file's order is the writer's): the
// later of the two is compared with the earlier as it passes, whichever it is.
TEST(ParameterSource, ATiedHeadStoredBeforeTheEmbeddingIsComparedToo) {
  TempDir dir;
  save_tied_model(dir);
  const SafetensorsFile saved = SafetensorsFile::read(dir.file("tied.safetensors"));
  std::vector<std::string> names;
  std::vector<std::vector<int64_t>> shapes;
  std::vector<std::vector<float>> tensors;
  for (const SafetensorsTensor& tensor : saved.tensors()) {  // the head first
    const bool head = tensor.name == "lm_head.weight";
    names.insert(head ? names.begin() : names.end(), tensor.name);
    shapes.insert(head ? shapes.begin() : shapes.end(), tensor.shape);
    tensors.insert(head ? tensors.begin() : tensors.end(), saved.to_float32(tensor));
  }
  ASSERT_EQ(names.front(), "lm_head.weight");
  for (const bool differs : {false, true}) {
    if (differs) tensors.front().back() += 1.0f;  // the head's last value
    std::vector<TensorToWrite> written;
    for (size_t i = 0; i < names.size(); ++i)
      written.push_back({names[i], shapes[i], tensors[i].data()});
    write_safetensors(dir.file("head_first.safetensors"), written, saved.metadata());
    const LoadedCheckpoint loaded =
        load_checkpoint(dir.file("head_first.safetensors"), Config{}, nullptr);
    ASSERT_LT(
        SafetensorsFile::read(dir.file("head_first.safetensors")).find("lm_head.weight")->begin,
        SafetensorsFile::read(dir.file("head_first.safetensors"))
            .find("token_embedding_table.weight")
            ->begin);
    const std::string message = error_message([&] { loaded.parameters->read_all(); });
    if (differs)
      EXPECT_NE(message.find("lm_head.weight differs from token_embedding_table.weight"),
                std::string::npos)
          << message;
    else
      EXPECT_EQ(message, "");
  }
}

}  // namespace
}  // namespace folio

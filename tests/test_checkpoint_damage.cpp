// Damaged and hostile checkpoints through the whole loader (reader, metadata, structure, tensor
// mapping): each must give one folio::Error, never a crash, an out-of-bounds read, a huge
// allocation or a silently different model. The files are edited in memory and parsed with
// SafetensorsFile::parse, as the fuzz target does.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include <nlohmann/json.hpp>

#include "io/checkpoint.h"
#include "io/safetensors.h"
#include "model/gpt.h"
#include "safetensors_bytes.h"
#include "test_helpers.h"

namespace folio {
namespace {

using testing::join_unchecked;
using testing::read_all;
using testing::split_safetensors;
using testing::TempDir;

const Vocabulary& small_vocabulary() {
  static const Vocabulary vocabulary = Vocabulary::from_text(U"abcde\n");
  return vocabulary;
}

// A real checkpoint of a very small model (1 layer, 2 heads of 2, width 4, block 4), as bytes.
std::string small_checkpoint() {
  static const std::string bytes = [] {
    TempDir dir;
    Config config;
    config.n_layer = 1, config.n_head = 2, config.n_embd = 4, config.block_size = 4;
    auto backend = make_backend("cpu", 1);
    GPT model(*backend, ModelShape::from_config(config, small_vocabulary().size()));
    model.initialize(7, 0.02, false);
    save_checkpoint(dir.file("ckpt.safetensors"), model, config, small_vocabulary(), 3, 2.5, 2.75);
    return read_all(dir.file("ckpt.safetensors"));
  }();
  return bytes;
}

// Loaded as a model is: the header checked, then every value read (and checked, with the data
// checksum, on that one pass) as it is written.
LoadedCheckpoint load(const std::string& bytes, const Vocabulary* data_vocabulary = nullptr) {
  LoadedCheckpoint loaded =
      load_checkpoint(SafetensorsFile::parse(bytes, "damaged.safetensors", DataCheck::kInOnePass),
                      Config{}, data_vocabulary);
  loaded.parameters->read_all();
  return loaded;
}

// The folio::Error's message, or "" when the file loads. Any other exception fails the test.
std::string load_error(const std::string& bytes, const Vocabulary* data_vocabulary = nullptr) {
  return testing::error_message([&] { load(bytes, data_vocabulary); });
}

#define EXPECT_REFUSED(bytes, expected)                              \
  do {                                                               \
    const std::string message = load_error(bytes);                   \
    EXPECT_NE(message.find(expected), std::string::npos)             \
        << "expected '" << (expected) << "' in '" << message << "'"; \
  } while (false)

// The checkpoint with its tensors and metadata changed by `edit`, written by folio's writer (so
// the checksums match the new contents: only the loader's own checks stand in the way).
template <typename Edit>
std::string rewritten(Edit edit) {
  const SafetensorsFile file = SafetensorsFile::parse(small_checkpoint(), "good");
  std::vector<std::vector<float>> values;
  for (const SafetensorsTensor& tensor : file.tensors()) values.push_back(file.to_float32(tensor));
  std::map<std::string, std::string> metadata = file.metadata();
  edit(file.tensors(), values, metadata);
  std::vector<TensorToWrite> tensors;
  for (size_t i = 0; i < file.tensors().size(); ++i)
    tensors.push_back({file.tensors()[i].name, file.tensors()[i].shape, values[i].data()});
  TempDir dir;
  write_safetensors(dir.file("edited.safetensors"), tensors, metadata);
  return read_all(dir.file("edited.safetensors"));
}

template <typename Edit>
std::string with_metadata(Edit edit) {
  return rewritten([&](const auto&, auto&, auto& metadata) { edit(metadata); });
}

std::string with_config(const std::string& key, const nlohmann::json& value) {
  return with_metadata([&](auto& metadata) {
    nlohmann::json config = nlohmann::json::parse(metadata.at("config"));
    config[key] = value;
    metadata["config"] = config.dump();
  });
}

TEST(CheckpointDamage, TheUndamagedFileLoads) {
  const LoadedCheckpoint loaded = load(small_checkpoint());
  EXPECT_EQ(loaded.step, 3);
  EXPECT_EQ(loaded.tokenizer.characters()->symbols(), small_vocabulary().symbols());
}

TEST(CheckpointDamage, EveryTruncationIsRefused) {
  const std::string good = small_checkpoint();
  for (size_t length = 0; length < good.size(); ++length)
    EXPECT_NE(load_error(good.substr(0, length)), "") << "cut at " << length;
}

// Every single flipped bit, in the header and in the data, is refused, except the few that
// rename the header checksum's own key: such a file no longer claims a header checksum, but what
// it holds is then exactly what folio wrote, so it must load as the original.
TEST(CheckpointDamage, EveryFlippedBitIsRefusedOrChangesNothing) {
  const std::string good = small_checkpoint();
  const LoadedCheckpoint original = load(good);
  const size_t key = good.find("\"header_sha256\"") + 1;
  for (size_t byte = 0; byte < good.size(); ++byte) {
    for (int bit = 0; bit < 8; ++bit) {
      std::string flipped = good;
      flipped[byte] = static_cast<char>(flipped[byte] ^ (1 << bit));
      const std::string message = load_error(flipped);
      if (!message.empty()) continue;
      EXPECT_TRUE(byte >= key && byte < key + 13) << "byte " << byte << " bit " << bit;
      const LoadedCheckpoint loaded = load(flipped);
      EXPECT_EQ(loaded.parameters->read_all(), original.parameters->read_all());
      EXPECT_EQ(config_to_json(loaded.config), config_to_json(original.config));
      EXPECT_EQ(loaded.tokenizer, original.tokenizer);
      EXPECT_EQ(loaded.step, original.step);
    }
  }
}

TEST(CheckpointDamage, NonFiniteParametersAreRefused) {
  for (float bad : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                    -std::numeric_limits<float>::infinity()}) {
    EXPECT_REFUSED(rewritten([&](const auto&, auto& values, auto&) { values[3][1] = bad; }),
                   "non-finite parameter");
  }
}

TEST(CheckpointDamage, WrongDtypesAreRefused) {
  auto parts = split_safetensors(small_checkpoint());
  auto& entry = parts.header["blocks.0.ffwd.net.0.weight"];  // F32 (16, 4): 256 bytes
  const nlohmann::json shape = entry["shape"];
  entry["dtype"] = "I32";  // same bytes, integers
  EXPECT_REFUSED(join_unchecked(parts), "must be floating point");
  entry["dtype"] = "I64";  // same bytes as I64 (8, 4): the shape is checked first
  entry["shape"] = {8, 4};
  EXPECT_REFUSED(join_unchecked(parts), "has shape [8, 4], but the config needs [16, 4]");
  entry["dtype"] = "F16";  // same bytes as F16 (32, 4): the shape no longer fits the model
  entry["shape"] = {32, 4};
  EXPECT_REFUSED(join_unchecked(parts),
                 "blocks.0.ffwd.net.0.weight has shape [32, 4], but the config needs [16, 4]");
  entry["dtype"] = "F16";  // F16 whose byte length does not match its shape
  entry["shape"] = shape;
  EXPECT_REFUSED(join_unchecked(parts), "but its dtype and shape need 128");
}

TEST(CheckpointDamage, WrongShapesMissingAndExtraTensorsAreRefused) {
  auto parts = split_safetensors(small_checkpoint());
  parts.header["blocks.0.ffwd.net.0.weight"]["shape"] = {4, 16};
  EXPECT_REFUSED(join_unchecked(parts), "has shape [4, 16], but the config needs [16, 4]");

  parts = split_safetensors(small_checkpoint());
  parts.header.erase("blocks.0.sa.heads.1.value.weight");
  EXPECT_REFUSED(join_unchecked(parts), "lacks tensor blocks.0.sa.heads.1.value.weight");

  parts = split_safetensors(small_checkpoint());
  const size_t end = parts.data.size();
  parts.header["blocks.1.ln1.weight"] = {
      {"dtype", "F32"}, {"shape", {0}}, {"data_offsets", {end, end}}};
  EXPECT_REFUSED(join_unchecked(parts), "has tensor blocks.1.ln1.weight, which this model");
}

TEST(CheckpointDamage, OverlappingAndOutOfRangeOffsetsAreRefused) {
  auto parts = split_safetensors(small_checkpoint());
  auto& offsets = parts.header["ln_f.weight"]["data_offsets"];
  const uint64_t begin = offsets[0].get<uint64_t>(), end = offsets[1].get<uint64_t>();
  offsets = {begin - 4, end - 4};
  EXPECT_REFUSED(join_unchecked(parts), "two tensors overlap");
  offsets = {parts.data.size() - 4, parts.data.size() + end - begin - 4};
  EXPECT_REFUSED(join_unchecked(parts), "lies outside the file");
}

TEST(CheckpointDamage, AConfigOfAHugeModelIsRefusedBeforeAllocating) {
  // A valid config (every key in range) whose model needs ~2^42 parameters: the file holds a few
  // hundred values, so the loader must refuse before reserving memory for them.
  std::string huge = with_metadata([](auto& metadata) {
    nlohmann::json config = nlohmann::json::parse(metadata.at("config"));
    config["n_layer"] = 4096;
    config["n_embd"] = 1 << 20;
    config["head_size"] = 0;
    metadata["config"] = config.dump();
  });
  EXPECT_REFUSED(huge, "but its tensors hold at most");
  // Heads whose fused qkv matrix has more rows than an int counts.
  std::string wide = with_metadata([](auto& metadata) {
    nlohmann::json config = nlohmann::json::parse(metadata.at("config"));
    config["n_head"] = 4096;
    config["head_size"] = 1 << 20;
    metadata["config"] = config.dump();
  });
  EXPECT_REFUSED(wide, "is too large");
  EXPECT_REFUSED(with_config("n_embd", -4), "out of range");
  EXPECT_REFUSED(with_config("block_size", "lots"), "is not an integer");
}

TEST(CheckpointDamage, BadMetadataIsRefusedOrIgnored) {
  EXPECT_REFUSED(with_metadata([](auto& m) { m["config"] = "{not json"; }), "damaged metadata");
  EXPECT_REFUSED(with_metadata([](auto& m) { m.erase("vocab"); }), "lacks its vocab metadata");
  EXPECT_REFUSED(with_metadata([](auto& m) { m["vocab"] = ""; }), "empty vocabulary");
  EXPECT_REFUSED(with_metadata([](auto& m) { m["vocab"] = "ba"; }), "not a sorted list");
  // JSON holds only valid UTF-8: an escaped lone surrogate is refused with the header.
  std::string surrogate = join_unchecked(split_safetensors(small_checkpoint()));
  surrogate.replace(surrogate.find("\"vocab\":\"") + 9, 1, "\\ud800");
  surrogate = testing::raw_file(surrogate.substr(8), "");
  EXPECT_REFUSED(surrogate, "not valid JSON");
  // Numbers the loader only reports: unreadable ones are "not recorded", never undefined
  // behaviour (a double of 1e300 or NaN cast to int64_t).
  for (const char* step : {"1e300", "nan", "-inf", "99999999999999999999", "7x", ""}) {
    const LoadedCheckpoint loaded = load(with_metadata([&](auto& m) { m["step"] = step; }));
    EXPECT_EQ(loaded.step, -1) << step;
  }
  const LoadedCheckpoint loaded =
      load(with_metadata([](auto& m) { m["val_loss"] = "nan", m["train_loss"] = "1e999"; }));
  EXPECT_EQ(loaded.val_loss, -1);
  EXPECT_EQ(loaded.train_loss, -1);
}

TEST(CheckpointDamage, ForeignFilesWithImpossibleShapesAreRefused) {
  auto foreign = [](const std::string& name, const nlohmann::json& shape) {
    auto parts = split_safetensors(small_checkpoint());
    parts.header.erase("__metadata__");
    parts.header[name]["shape"] = shape;
    return testing::raw_file(parts.header.dump(), parts.data);
  };
  // The shapes keep each tensor's byte length, so only the structure checks can refuse them.
  auto parts = split_safetensors(small_checkpoint());
  parts.header.erase("__metadata__");
  auto& position = parts.header["position_embedding_table.weight"];
  position["shape"] = {0, 16};
  position["data_offsets"][1] = position["data_offsets"][0];
  EXPECT_NE(load_error(testing::raw_file(parts.header.dump(), parts.data), &small_vocabulary())
                .find("config key block_size: '0' is out of range"),
            std::string::npos);
  EXPECT_NE(load_error(foreign("position_embedding_table.weight", {16, 1}), &small_vocabulary())
                .find("has shape"),
            std::string::npos);
  EXPECT_NE(load_error(foreign("blocks.0.sa.heads.0.key.weight", {1, 8}), &small_vocabulary())
                .find("has shape"),
            std::string::npos);
  EXPECT_NE(load_error(foreign("position_embedding_table.weight", {16}), &small_vocabulary())
                .find("not matrices"),
            std::string::npos);
}

// A path that is not UTF-8 (a Latin-1 file name) in the config used to fail the save after
// training with a JSON exception: such bytes cannot be stored in JSON, so they become U+FFFD.
TEST(CheckpointDamage, ANonUtf8PathInTheConfigDoesNotStopTheSave) {
  TempDir dir;
  Config config;
  config.n_layer = 1, config.n_head = 2, config.n_embd = 4, config.block_size = 4;
  config.data = "caf\xe9.txt";
  auto backend = make_backend("cpu", 1);
  GPT model(*backend, ModelShape::from_config(config, small_vocabulary().size()));
  model.initialize(7, 0.02, false);
  save_checkpoint(dir.file("ckpt.safetensors"), model, config, small_vocabulary(), 1, 1, 1);
  const LoadedCheckpoint loaded = load_checkpoint(dir.file("ckpt.safetensors"), Config{}, nullptr);
  EXPECT_EQ(loaded.config.data, "caf\xef\xbf\xbd.txt");
  EXPECT_EQ(loaded.parameters->read_all(), model.read_parameters());
}

}  // namespace
}  // namespace folio

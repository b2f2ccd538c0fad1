// The safetensors reader and writer, and the reader's refusals of damaged or hostile files.
#include <gtest/gtest.h>

#include <cstring>

#include "io/safetensors.h"
#include "test_helpers.h"

namespace folio {
namespace {

using testing::error_message;
using testing::TempDir;

std::string read_all(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>());
}

// A raw safetensors file from a header text and data bytes.
std::string raw_file(const std::string& header, const std::string& data) {
  std::string file(8, '\0');
  const uint64_t size = header.size();
  std::memcpy(file.data(), &size, 8);
  return file + header + data;
}

TEST(Safetensors, RoundTripsTensorsAndMetadata) {
  TempDir dir;
  const std::vector<float> a = {1, 2, 3, 4, 5, 6}, b = {-0.5f};
  write_safetensors(dir.file("x.safetensors"), {{"a", {2, 3}, a.data()}, {"b", {1}, b.data()}},
                    {{"note", "hello"}});
  const auto file = SafetensorsFile::read(dir.file("x.safetensors"));
  EXPECT_EQ(file.metadata().at("note"), "hello");
  ASSERT_NE(file.find("a"), nullptr);
  EXPECT_EQ(file.find("a")->shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(file.to_float32(*file.find("a")), a);
  EXPECT_EQ(file.to_float32(*file.find("b")), b);
  // The header is padded so the data starts 8-byte aligned, as the official writer does.
  const std::string bytes = read_all(dir.file("x.safetensors"));
  uint64_t header_size;
  std::memcpy(&header_size, bytes.data(), 8);
  EXPECT_EQ(header_size % 8, 0u);
  // No temporary file is left behind.
  size_t entries = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir.file(""))) ++entries, (void)entry;
  EXPECT_EQ(entries, 1u);
}

TEST(Safetensors, ConvertsOtherFloatTypes) {
  TempDir dir;
  // F16 1.0 = 0x3C00, BF16 -2.0 = 0xC000, F64 0.25
  std::string data;
  const uint16_t half = 0x3C00, bf16 = 0xC000;
  const double quarter = 0.25;
  data.append(reinterpret_cast<const char*>(&half), 2);
  data.append(reinterpret_cast<const char*>(&bf16), 2);
  data.append(reinterpret_cast<const char*>(&quarter), 8);
  const std::string header =
      R"({"h":{"dtype":"F16","shape":[1],"data_offsets":[0,2]},)"
      R"("b":{"dtype":"BF16","shape":[1],"data_offsets":[2,4]},)"
      R"("d":{"dtype":"F64","shape":[1],"data_offsets":[4,12]}})";
  const auto file = SafetensorsFile::read(dir.write("t.safetensors", raw_file(header, data)));
  EXPECT_EQ(file.to_float32(*file.find("h"))[0], 1.0f);
  EXPECT_EQ(file.to_float32(*file.find("b"))[0], -2.0f);
  EXPECT_EQ(file.to_float32(*file.find("d"))[0], 0.25f);
}

TEST(Safetensors, RefusesDamagedAndHostileFiles) {
  TempDir dir;
  const std::vector<float> a(100, 1.5f);
  write_safetensors(dir.file("good.safetensors"), {{"a", {10, 10}, a.data()}}, {});
  const std::string good = read_all(dir.file("good.safetensors"));
  auto refuse = [&](const std::string& bytes, const std::string& expected) {
    const std::string path = dir.write("bad.safetensors", bytes);
    const std::string message = error_message([&] { SafetensorsFile::read(path); });
    EXPECT_NE(message.find(expected), std::string::npos)
        << "expected '" << expected << "' in '" << message << "'";
  };
  refuse(good.substr(0, 5), "shorter than the 8-byte header");
  refuse(good.substr(0, 40), "header runs past the end");
  refuse(good.substr(0, good.size() - 4), "outside the file");
  std::string flipped = good;
  flipped[flipped.size() - 3] ^= 0x10;
  refuse(flipped, "does not match the checksum");
  std::string huge(8, '\0');
  const uint64_t size = 1ULL << 40;
  std::memcpy(huge.data(), &size, 8);
  refuse(huge, "limit 100 MiB");
  refuse(raw_file("{not json", ""), "not valid JSON");
  refuse(raw_file("[1,2]", ""), "not a JSON object");
  refuse(raw_file(R"({"a":{"dtype":"Q7","shape":[1],"data_offsets":[0,4]}})", "abcd"),
         "unknown dtype");
  refuse(raw_file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}})", "abcd"),
         "need 8");
  refuse(raw_file(R"({"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})", "abcd"),
         "negative dimension");
  refuse(raw_file(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,0]}})", "abcd"),
         "outside the file");
  refuse(raw_file(R"({"a":{"dtype":"F32","shape":[4294967296,4294967296,4294967296]},)"
                  R"("data_offsets":[0,4]})",
                  "abcd"),
         "lacks dtype");
  refuse(raw_file(R"({"a":{"dtype":"F32","shape":[4294967296,4294967296,4294967296],)"
                  R"("data_offsets":[0,4]}})",
                  "abcd"),
         "impossibly large");
  refuse(raw_file(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                  R"("b":{"dtype":"F32","shape":[1],"data_offsets":[2,6]}})",
                  "abcdefgh"),
         "overlap");
  refuse(raw_file(R"({"__metadata__":{"x":1}})", ""), "not a string");
  const std::string missing = dir.file("nope.safetensors");
  EXPECT_NE(error_message([&] { SafetensorsFile::read(missing); }).find("does not exist"),
            std::string::npos);
}

TEST(Safetensors, IntegerTensorsAreNotParameters) {
  TempDir dir;
  const auto file = SafetensorsFile::read(dir.write(
      "i.safetensors", raw_file(R"({"a":{"dtype":"I64","shape":[1],"data_offsets":[0,8]}})",
                                std::string(8, '\1'))));
  EXPECT_NE(error_message([&] { file.to_float32(*file.find("a")); }).find("must be floating"),
            std::string::npos);
}

}  // namespace
}  // namespace folio

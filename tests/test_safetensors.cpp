// The safetensors reader and writer, and the reader's refusals of damaged or hostile files.
#include <gtest/gtest.h>

#include <cstring>

#include "io/safetensors.h"
#include "safetensors_bytes.h"
#include "test_helpers.h"

namespace folio {
namespace {

using testing::error_message;
using testing::raw_file;
using testing::read_all;
using testing::TempDir;

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
  refuse(raw_file("[1,2]", ""), "does not start with a length and a JSON header");
  refuse(raw_file(R"({"a":{"dtype":"Q7","shape":[1],"data_offsets":[0,4]}})", "abcd"),
         "unknown dtype");
  refuse(raw_file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}})", "abcd"),
         "need 8");
  refuse(raw_file(R"({"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})", "abcd"),
         "not a non-negative integer");
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

TEST(Safetensors, ParsesFromMemoryAsFromAFile) {
  TempDir dir;
  const std::vector<float> a = {1, 2, 3};
  write_safetensors(dir.file("m.safetensors"), {{"a", {3}, a.data()}}, {{"k", "v"}});
  const auto file = SafetensorsFile::parse(read_all(dir.file("m.safetensors")), "in memory");
  EXPECT_EQ(file.path(), "in memory");
  EXPECT_EQ(file.to_float32(*file.find("a")), a);
  EXPECT_EQ(file.metadata().at("k"), "v");
  EXPECT_NE(error_message([] { SafetensorsFile::parse("1234", "in memory"); }).find("in memory"),
            std::string::npos);
}

TEST(Safetensors, HeaderChecksumCatchesAChangedHeader) {
  TempDir dir;
  const std::vector<float> a = {1, 2, 3, 4};
  write_safetensors(dir.file("h.safetensors"), {{"a", {2, 2}, a.data()}}, {{"step", "10"}});
  const std::string good = read_all(dir.file("h.safetensors"));
  EXPECT_EQ(SafetensorsFile::parse(good, "h").metadata().at("header_sha256").size(), 64u);
  // A digit of the recorded step changes: still valid JSON, still a valid file, but not the
  // header folio wrote.
  std::string changed = good;
  changed[changed.find("\"10\"") + 1] = '9';
  EXPECT_NE(error_message([&] {
              SafetensorsFile::parse(changed, "h");
            }).find("its header does not match the checksum"),
            std::string::npos);
  // So does a change to the checksum itself.
  std::string wrong_checksum = good;
  char& digit = wrong_checksum[wrong_checksum.find("header_sha256") + 16];
  digit = digit == '0' ? '1' : '0';
  EXPECT_NE(error_message([&] {
              SafetensorsFile::parse(wrong_checksum, "h");
            }).find("its header does not match the checksum"),
            std::string::npos);
  // A header another tool re-serialised (other spacing) is not held to the checksum; its data
  // still is, and every structural check still applies.
  auto parts = testing::split_safetensors(good);
  const std::string respaced = raw_file(parts.header.dump(1), parts.data);
  EXPECT_EQ(SafetensorsFile::parse(respaced, "h")
                .to_float32(*SafetensorsFile::parse(respaced, "h").find("a")),
            a);
}

TEST(Safetensors, SizeArithmeticCannotOverflow) {
  auto expect_refusal = [](const std::string& header, const std::string& data,
                           const std::string& expected) {
    const std::string message =
        error_message([&] { SafetensorsFile::parse(raw_file(header, data), "s"); });
    EXPECT_NE(message.find(expected), std::string::npos) << header << ": " << message;
  };
  // 2^62 * 4 bytes wraps to 0 in 64 bits: the product must be refused before it wraps.
  expect_refusal(R"({"a":{"dtype":"F32","shape":[4611686018427387904],"data_offsets":[0,0]}})",
                 "", "impossibly large");
  expect_refusal(R"({"a":{"dtype":"F64","shape":[2,1152921504606846976],"data_offsets":[0,0]}})",
                 "", "impossibly large");
  // An offset near 2^64 must not wrap past the data section's size.
  expect_refusal(R"({"a":{"dtype":"U8","shape":[1],"data_offsets":[18446744073709551615,0]}})",
                 "x", "outside the file");
  expect_refusal(R"({"a":{"dtype":"U8","shape":[1],"data_offsets":[0,18446744073709551615]}})",
                 "x", "outside the file");
  // A dimension that is a float or does not fit in 64 bits (JSON reads it as a float).
  expect_refusal(R"({"a":{"dtype":"U8","shape":[1.0],"data_offsets":[0,1]}})", "x",
                 "not a non-negative integer");
  expect_refusal(R"({"a":{"dtype":"U8","shape":[18446744073709551616],"data_offsets":[0,1]}})",
                 "x", "not a non-negative integer");
  // A name that would break the one-line error rule of every message that quotes it.
  expect_refusal(R"({"a\nb":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}})", "x",
                 "tensor name 'a\\nb' holds control characters");
  // An empty tensor with a huge dimension after the zero is a valid (empty) tensor.
  const auto file = SafetensorsFile::parse(
      raw_file(R"({"a":{"dtype":"F32","shape":[0,4611686018427387904],"data_offsets":[0,0]}})",
               ""),
      "s");
  EXPECT_EQ(file.find("a")->element_count(), 0u);
  EXPECT_TRUE(file.to_float32(*file.find("a")).empty());
}

TEST(Safetensors, OversizedHeadersAreRefusedBeforeReading) {
  auto with_header_size = [](uint64_t size) {
    std::string bytes(8, '\0');
    std::memcpy(bytes.data(), &size, 8);
    return bytes + "{}";
  };
  EXPECT_NE(error_message([&] {
              SafetensorsFile::parse(with_header_size((100u << 20) + 1), "o");
            }).find("limit 100 MiB"),
            std::string::npos);
  EXPECT_NE(error_message([&] {
              SafetensorsFile::parse(with_header_size(100u << 20), "o");
            }).find("runs past the end"),
            std::string::npos);
  EXPECT_NE(error_message([&] {
              SafetensorsFile::parse(with_header_size(~0ULL), "o");
            }).find("limit 100 MiB"),
            std::string::npos);
}

TEST(Safetensors, ADirectoryIsNotACheckpoint) {
  TempDir dir;
  EXPECT_NE(error_message([&] { SafetensorsFile::read(dir.file("")); }).find("is a folder"),
            std::string::npos);
}

}  // namespace
}  // namespace folio

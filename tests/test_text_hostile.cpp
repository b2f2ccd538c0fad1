// The text path with the inputs the fuzz target (tests/fuzz/fuzz_text.cpp) explores: every
// UTF-8 edge, line endings, characters from every plane, and data held in memory.
#include <gtest/gtest.h>

#include "data/text_dataset.h"
#include "data/utf8.h"
#include "data/vocabulary.h"
#include "test_helpers.h"

namespace folio {
namespace {

using testing::error_message;

TEST(TextHostile, VocabularyIsSortedAcrossEveryPlane) {
  // The table of seen characters is sized to the largest one below U+10000; characters above go
  // through a sort. Both must merge into one sorted list.
  const std::u32string text = U"\U0010FFFF\uFFFF\u00e9a\U0001F600\u00e9\n\uFFFF\U0001F600";
  const Vocabulary vocabulary = Vocabulary::from_text(text);
  EXPECT_EQ(vocabulary.symbols(), (std::vector<char32_t>{U'\n', U'a', U'\u00e9', U'\uFFFF',
                                                         U'\U0001F600', U'\U0010FFFF'}));
  EXPECT_EQ(Vocabulary::from_text(std::u32string(1, U'\0')).symbols(),
            std::vector<char32_t>{U'\0'});
  EXPECT_EQ(Vocabulary::from_text(U"").size(), 0);
  EXPECT_EQ(Vocabulary::from_utf8_symbols(vocabulary.symbols_utf8()).symbols(),
            vocabulary.symbols());
}

TEST(TextHostile, StrictUtf8ReadsBackByteForByte) {
  using namespace std::string_literals;  // "..."s keeps the NUL of "a\0b" (a char* would end there)
  for (const std::string& bytes :
       {"\xf4\x8f\xbf\xbf"s, "\xed\x9f\xbf"s, "\xee\x80\x80"s, "a\0b"s}) {
    const auto decoded = decode_utf8(bytes, nullptr, false);
    ASSERT_TRUE(decoded) << bytes;
    EXPECT_EQ(encode_utf8(*decoded), bytes);
  }
  const auto with_nul = decode_utf8("a\0b"s, nullptr, false);
  ASSERT_TRUE(with_nul);
  EXPECT_EQ(*with_nul, (std::u32string{U'a', U'\0', U'b'}));
  for (const std::string bytes : {"\xf4\x90\x80\x80", "\xed\xa0\x80", "\xc0\x80", "\xe0\x80\x80",
                                  "\xf8\x88\x80\x80\x80", "\xe2\x82", "\x80"}) {
    Utf8Problem problem{};
    EXPECT_FALSE(decode_utf8(bytes, &problem)) << bytes;
    EXPECT_LT(problem.byte_offset, bytes.size());
  }
}

TEST(TextHostile, DatasetFromMemorySplitsAndChecksAsFromAFile) {
  const TextDataset dataset = text_dataset_from_bytes("ab\r\ncd\ref", "memory.txt", 0.5);
  EXPECT_EQ(dataset.tokens.size(), 8u);  // "ab\ncd\nef": line endings as Python reads them
  EXPECT_EQ(dataset.train_size, 4u);
  EXPECT_EQ(dataset.vocabulary.decode(dataset.tokens), "ab\ncd\nef");
  EXPECT_EQ(error_message([&] { check_dataset_fits(dataset, 3); }), "");
  EXPECT_NE(error_message([&] { check_dataset_fits(dataset, 4); }).find("is too short"),
            std::string::npos);
  EXPECT_NE(error_message([&] { text_dataset_from_bytes("", "memory.txt", 0.5); }).find("is empty"),
            std::string::npos);
  const Vocabulary letters = Vocabulary::from_text(U"ab");
  EXPECT_NE(error_message([&] {
              text_dataset_from_bytes("abc", "memory.txt", 0.5, &letters);
            }).find("'c' (U+0063) at position 2"),
            std::string::npos);
}

// A checkpoint or a token file given as --data had been "not valid UTF-8 ... convert it to UTF-8,
// e.g. with iconv": each is named for what it is, with what to pass instead.
TEST(TextHostile, CheckpointsAndTokenFilesAreNamedForWhatTheyAre) {
  using namespace std::string_literals;
  const auto error_of_text = [](const std::string& bytes, const std::string& path) {
    return error_message([&] { text_dataset_from_bytes(bytes, path, 0.9); });
  };
  const auto int32s = [](std::initializer_list<int32_t> values) {
    std::string bytes;
    for (int32_t value : values) bytes.append(reinterpret_cast<const char*>(&value), 4);
    return bytes;
  };
  const std::string ids = int32s({198 | (15496 << 16), 995 | (50256 << 16)});  // raw uint16
  const struct {
    std::string bytes, path, expected;
  } refused[] = {
      // safetensors: an 8-byte little-endian header length, then the JSON header.
      {"\x02\0\0\0\0\0\0\0{}"s, "out/ckpt.safetensors",
       "out/ckpt.safetensors is a checkpoint (safetensors), not a text: start a run from it with "
       "--init_from out/ckpt.safetensors"},
      // llm.c's shards, in both of their layouts, whatever the file's name.
      {int32s({20240520, 1, 3}) + std::string(1012, '\0'), "tokens/val_000000.bin",
       "tokens/val_000000.bin is a token file (llm.c's shard layout), not a text: pass the "
       "folder that holds the train and val token files, --data tokens"},
      {int32s({20240801, 7, 3}) + std::string(1012, '\0'), "shard", "is a token file"},
      // nanoGPT's raw ids: no header, told by the name when they are not UTF-8.
      {ids, "train.bin",
       "train.bin is not UTF-8 text but likely a token file (nanoGPT's raw ids, as folio prepare "
       "writes them): pass the folder that holds train.bin and val.bin, --data ."},
      {ids, "text.txt", "is not valid UTF-8"}};
  for (const auto& [bytes, path, expected] : refused) {
    const std::string message = error_of_text(bytes, path);
    EXPECT_NE(message.find(expected), std::string::npos) << message;
  }
  // Texts that only look alike are texts: a .bin in UTF-8, a '{' ninth with no length before it.
  EXPECT_EQ(error_of_text("To be, or not to be: that is the question.\n", "notes.bin"), "");
  EXPECT_EQ(error_of_text("12345678{ \"key\": 1 }\n", "braces.txt"), "");
}

}  // namespace
}  // namespace folio

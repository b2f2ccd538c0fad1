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

}  // namespace
}  // namespace folio

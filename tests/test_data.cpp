// Text decoding, the vocabulary, the split and the batch windows.
#include <gtest/gtest.h>

#include "data/batches.h"
#include "data/text_dataset.h"
#include "data/utf8.h"
#include "data/vocabulary.h"
#include "test_helpers.h"

namespace folio {
namespace {

using testing::error_message;
using testing::TempDir;

TEST(Utf8, DecodesLikePython) {
  Utf8Problem problem;
  auto text = decode_utf8("a\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80", &problem);
  ASSERT_TRUE(text);
  EXPECT_EQ(*text, std::u32string(U"a\u00e9\u20ac\U0001F600"));
  // Universal newlines, as open(..., encoding='utf-8').read() does.
  EXPECT_EQ(*decode_utf8("a\r\nb\rc\n", &problem), std::u32string(U"a\nb\nc\n"));
  EXPECT_EQ(encode_utf8(U"a\u00e9\u20ac\U0001F600"), "a\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80");
}

TEST(Utf8, RejectsInvalidInputWithItsOffset) {
  Utf8Problem problem;
  EXPECT_FALSE(decode_utf8("ab\xff", &problem));
  EXPECT_EQ(problem.byte_offset, 2u);
  EXPECT_FALSE(decode_utf8("\xc0\xaf", &problem));  // overlong '/'
  EXPECT_NE(problem.what.find("overlong"), std::string::npos);
  EXPECT_FALSE(decode_utf8("\xed\xa0\x80", &problem));  // U+D800
  EXPECT_NE(problem.what.find("surrogate"), std::string::npos);
  EXPECT_FALSE(decode_utf8("x\xe2\x82", &problem));  // cut off
  EXPECT_EQ(problem.byte_offset, 1u);
  EXPECT_FALSE(decode_utf8("\xf4\x90\x80\x80", &problem));  // above U+10FFFF
}

TEST(Vocabulary, IsTheSortedSetOfCharacters) {
  const Vocabulary v = Vocabulary::from_text(U"hello, w\u00f6rld\n");
  EXPECT_EQ(v.symbols(), (std::vector<char32_t>{U'\n', U' ', U',', U'd', U'e', U'h', U'l', U'o',
                                                U'r', U'w', U'\u00f6'}));
  const auto ids = v.encode(U"world", "test");
  EXPECT_EQ(v.decode(ids), "world");
  EXPECT_EQ(Vocabulary::from_utf8_symbols(v.symbols_utf8()).symbols(), v.symbols());
  const std::string message = error_message([&] { v.encode(U"wax", "--prompt"); });
  EXPECT_NE(message.find("--prompt has the character 'a'"), std::string::npos) << message;
}

TEST(TextDataset, SplitsAtIntOfNinetyPercent) {
  TempDir dir;
  const std::string text(1001, 'x');
  const auto data = load_text_dataset(dir.write("a.txt", text + "y"), 0.9);
  EXPECT_EQ(data.tokens.size(), 1002u);
  EXPECT_EQ(data.train_size, static_cast<size_t>(0.9 * 1002));  // int(0.9 * len(data))
  EXPECT_EQ(data.vocabulary.size(), 2);
}

TEST(TextDataset, BadFilesGiveOneClearError) {
  TempDir dir;
  EXPECT_NE(error_message([&] { load_text_dataset(dir.file("missing.txt"), 0.9); })
                .find("does not exist: pass --data FILE"),
            std::string::npos);
  EXPECT_NE(error_message([&] { load_text_dataset(dir.write("e.txt", ""), 0.9); }).find("is empty"),
            std::string::npos);
  EXPECT_NE(error_message([&] { load_text_dataset(dir.write("b.txt", "ok\xff\xfe"), 0.9); })
                .find("is not valid UTF-8"),
            std::string::npos);
  const auto short_data = load_text_dataset(dir.write("s.txt", std::string(100, 'a')), 0.9);
  EXPECT_NE(error_message([&] { check_dataset_fits(short_data, 16); }).find("is too short"),
            std::string::npos);
  EXPECT_NO_THROW(check_dataset_fits(short_data, 8));  // val split of 10 holds 9 + 1
}

TEST(Batches, TargetsAreInputsShiftedByOne) {
  std::vector<int32_t> split(500);
  for (size_t i = 0; i < split.size(); ++i) split[i] = static_cast<int32_t>(i);
  Batch batch(8, 16);
  fill_random_batch(batch, split, 1337, RandomPurpose::kTrainBatch, 3, 0);
  for (int b = 0; b < 8; ++b) {
    const int32_t start = batch.inputs[b * 16];
    EXPECT_LT(start, 500 - 16);
    for (int t = 0; t < 16; ++t) {
      EXPECT_EQ(batch.inputs[b * 16 + t], start + t);
      EXPECT_EQ(batch.targets[b * 16 + t], start + t + 1);
    }
  }
}

TEST(Batches, WindowsDependOnTheGlobalIndexNotOnTheSplitOfTheBatch) {
  std::vector<int32_t> split(10000);
  for (size_t i = 0; i < split.size(); ++i) split[i] = static_cast<int32_t>(i);
  Batch whole(4, 8), first(2, 8), second(2, 8);
  fill_random_batch(whole, split, 7, RandomPurpose::kTrainBatch, 5, 0);
  fill_random_batch(first, split, 7, RandomPurpose::kTrainBatch, 5, 0);
  fill_random_batch(second, split, 7, RandomPurpose::kTrainBatch, 5, 2);
  std::vector<int32_t> joined = first.inputs;
  joined.insert(joined.end(), second.inputs.begin(), second.inputs.end());
  EXPECT_EQ(joined, whole.inputs);
  Batch other_step(4, 8);
  fill_random_batch(other_step, split, 7, RandomPurpose::kTrainBatch, 6, 0);
  EXPECT_NE(other_step.inputs, whole.inputs);
}

TEST(Batches, ConsecutiveWindowsCoverTheSplit) {
  std::vector<int32_t> split(35);
  for (size_t i = 0; i < split.size(); ++i) split[i] = static_cast<int32_t>(i);
  EXPECT_EQ(consecutive_window_count(35, 8), 4u);  // windows need 9 tokens: 0..8, 8..16, ...
  EXPECT_EQ(consecutive_window_count(33, 8), 4u);
  EXPECT_EQ(consecutive_window_count(32, 8), 3u);
  Batch batch(3, 8);
  EXPECT_EQ(fill_consecutive_batch(batch, split, 0), 3);
  EXPECT_EQ(batch.inputs[8], 8);
  EXPECT_EQ(batch.targets[23], 24);
  EXPECT_EQ(fill_consecutive_batch(batch, split, 3), 1);
  EXPECT_EQ(batch.inputs[0], 24);
  EXPECT_EQ(batch.targets[7], 32);
}

}  // namespace
}  // namespace folio

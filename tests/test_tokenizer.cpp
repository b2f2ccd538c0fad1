// The byte-level BPE's parts that the comparison with tiktoken (tests/tokenizer/) does not see
// one by one: GPT-2's pre-tokenisation, invalid UTF-8, the merge loop on long pieces, and the
// token files' writer and reader with every kind of damage.
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <numeric>
#include <random>

#include <nlohmann/json.hpp>

#include "data/token_shards.h"
#include "test_helpers.h"
#include "tokenizer/bpe_trainer.h"
#include "tokenizer/byte_level_bpe.h"
#include "tokenizer/pretokenizer.h"
#include "tokenizer/tokenizer_files.h"

namespace folio {
namespace {

using Pieces = std::vector<std::string_view>;

TEST(PreTokenizer, SplitsAsGpt2) {
  const PreTokenizer gpt2;
  // The last space of a run goes with the next word (\s+(?!\S)); a run at the end stays whole.
  EXPECT_EQ(gpt2.split("a   b"), (Pieces{"a", "  ", " b"}));
  EXPECT_EQ(gpt2.split("end   "), (Pieces{"end", "   "}));
  EXPECT_EQ(gpt2.split("I'm don't"), (Pieces{"I", "'m", " don", "'t"}));
  EXPECT_EQ(gpt2.split("x 123!!"), (Pieces{"x", " 123", "!!"}));
  EXPECT_EQ(gpt2.split("\n\nHi"), (Pieces{"\n", "\n", "Hi"}));
  EXPECT_EQ(gpt2.split("caf\u00e9 \u65e5\u672c"), (Pieces{"caf\u00e9", " \u65e5\u672c"}));
}

TEST(PreTokenizer, InvalidUtf8RunsArePiecesOfTheirOwn) {
  const PreTokenizer gpt2;
  EXPECT_EQ(gpt2.split("ab\xff\xfe cd"), (Pieces{"ab", "\xff\xfe", " cd"}));
  // A cut-off character followed by a whole one: only the cut-off bytes are invalid.
  EXPECT_EQ(gpt2.split("\xe2\x82\xe2\x82\xac"), (Pieces{"\xe2\x82", "\xe2\x82\xac"}));
  EXPECT_EQ(PreTokenizer::valid_utf8_prefix("ok\xed\xa0\x80"), 2u);  // a surrogate
  EXPECT_EQ(PreTokenizer::invalid_utf8_prefix("\xc0\xaf"
                                              "a"),
            2u);                                                       // an overlong '/'
  EXPECT_EQ(PreTokenizer::valid_utf8_prefix("\xf4\x8f\xbf\xbf"), 4u);  // U+10FFFF
  EXPECT_EQ(PreTokenizer::valid_utf8_prefix("\xf4\x90\x80\x80"), 0u);  // above it
}

// BPE written the slow, obvious way: merge the adjacent pair of lowest rank (leftmost of equals)
// until none has a merge.
std::vector<TokenId> reference_bpe(const BpeDefinition& d, std::string_view piece) {
  std::map<std::pair<TokenId, TokenId>, size_t> rank;
  for (size_t r = 0; r < d.merges.size(); ++r) rank.emplace(d.merges[r], r);
  std::map<std::string, TokenId> id_of;
  for (TokenId id = 0; id < d.tokens.size(); ++id) id_of[d.tokens[id]] = id;
  std::vector<TokenId> s;
  for (char b : piece) s.push_back(id_of.at(std::string(1, b)));
  for (;;) {
    size_t best = s.size(), best_rank = SIZE_MAX;
    for (size_t i = 0; i + 1 < s.size(); ++i) {
      const auto found = rank.find({s[i], s[i + 1]});
      if (found != rank.end() && found->second < best_rank) best = i, best_rank = found->second;
    }
    if (best == s.size()) return s;
    s[best] = id_of.at(d.tokens[s[best]] + d.tokens[s[best + 1]]);
    s.erase(s.begin() + best + 1);
  }
}

TEST(ByteLevelBpe, ShortAndLongPiecesMergeAsTheDefinitionSays) {
  // Words of a three-letter alphabet: pieces up to 64 bytes take the scan, longer ones the heap.
  std::mt19937 random(7);
  std::string text;
  for (int w = 0; w < 3000; ++w) {
    text += ' ';
    for (int k = 0, n = 2 + random() % 8; k < n; ++k) text += "abc"[random() % 3];
  }
  const ByteLevelBpe bpe(train_byte_level_bpe(text, 400, 1));
  for (size_t n : {2, 5, 17, 64, 65, 100, 333, 2000}) {
    std::string word;
    for (size_t k = 0; k < n; ++k) word += "abc"[random() % 3];
    EXPECT_EQ(bpe.encode(word), reference_bpe(bpe.definition(), word)) << n;
    EXPECT_EQ(bpe.decode(bpe.encode(word)), word);
  }
}

TEST(ByteLevelBpe, EncodesTheSameOnAnyNumberOfThreads) {
  std::string text;
  for (int i = 0; i < 40000; ++i) text += "Line " + std::to_string(i) + ":  some words\n\n";
  // Runs of three newlines teach a "\n\n" token, which a cut just after "\n\n" would wrongly
  // produce (alone at the end of a stretch, `\s+(?!\S)` takes both newlines).
  std::string training = text;
  for (int i = 0; i < 1000; ++i) training += "a\n\n\nb ";
  const ByteLevelBpe bpe(train_byte_level_bpe(training, 400, 2));
  const std::vector<TokenId> one = bpe.encode(text, false, 1);
  EXPECT_GT(ByteLevelBpe::cut_for_threads(text, 1 << 18).size(), 2u);
  EXPECT_EQ(bpe.encode(text, false, 2), one);
  std::vector<TokenId> whole;
  bpe.encode_ordinary(text, whole);  // no cuts at all
  EXPECT_EQ(whole, one);
  EXPECT_EQ(bpe.decode(one), text);
}

TEST(PreTokenizer, KnowsWhichPatternsMayStartAnywhere) {
  const std::string cl100k = kCl100kPattern;
  for (const std::string& pattern : {std::string(kGpt2Pattern), cl100k, std::string("[^a]|a"),
                                     std::string(R"([\]^]+|\^)")})
    EXPECT_TRUE(PreTokenizer(pattern).starts_anywhere()) << pattern;
  for (const std::string& pattern :
       {std::string("(?<=a)b|."), std::string(R"(\bx|.)"), std::string(R"(\Bx|.)"),
        std::string("^x|."), std::string(R"(\Ax|.)"), std::string(R"(\Gx|.)"),
        std::string(R"([a]^|.)")})
    EXPECT_FALSE(PreTokenizer(pattern).starts_anywhere()) << pattern;
}

// Shares of a text cut anywhere (any pattern that never looks back) give the ids of the whole
// text split at once, on any number of threads. Besides cl100k's pattern, one that never lets
// two splits meet again once they are one character apart (pairs of characters): a share
// whose guessed start is not a piece boundary is split again from where the share before ended.
TEST(ByteLevelBpe, SharesCutAnywhereJoinWhereTheirPiecesMeet) {
  std::string text;
  std::mt19937 random(11);
  const char* words[] = {"said", "he", "!", "?!", "  ", "\t", "\n", "\n\n", " \n ", "123456",
                         "caf\xc3\xa9", "\xff\xfe", "I'm", " x", "<|endoftext|>"};
  while (text.size() < (size_t(3) << 20)) text += words[random() % std::size(words)];
  BpeDefinition trained = train_byte_level_bpe(text.substr(0, 200000), 400, 2);
  const std::string cl100k = kCl100kPattern;
  for (const std::string& pattern : {cl100k, std::string(R"([\s\S]{2})")}) {
    SCOPED_TRACE(pattern);
    BpeDefinition definition = trained;
    definition.pattern = pattern;
    const ByteLevelBpe bpe(definition);
    std::vector<TokenId> whole;
    bpe.encode_ordinary(text, whole);
    for (int threads : {1, 2, 3, 7}) EXPECT_EQ(bpe.encode(text, false, threads), whole) << threads;
    EXPECT_EQ(bpe.decode(whole), text);
    // With the special token: the stretches between its occurrences are shared out alike.
    const std::vector<TokenId> special_one = bpe.encode(text, true, 1);
    EXPECT_EQ(bpe.encode(text, true, 3), special_one);
    EXPECT_LT(special_one.size(), whole.size());
  }
}

// Where `folio prepare` may end a piece of its corpus (last_safe_cut): after the last special
// token, unless a longer special token that begins with it could still be completing; for GPT-2's
// pattern at the last newline after a printable character; never inside a special token.
TEST(ByteLevelBpe, SafeCutsAreWhereNothingAfterChangesTheIds) {
  BpeDefinition definition = train_byte_level_bpe("hello world\nsaid he", 270, 1);
  const ByteLevelBpe gpt2(definition);
  EXPECT_EQ(gpt2.last_safe_cut("he said\nso  \n"), 7u);  // before the newline after "d"
  EXPECT_EQ(gpt2.last_safe_cut("he said<|endoftext|>  more"), 20u);
  EXPECT_EQ(gpt2.last_safe_cut("a<|endoftext|>\nb"), 14u);  // "\n" after ">" is later still
  EXPECT_EQ(gpt2.last_safe_cut("no cut here"), 0u);
  definition.pattern = kCl100kPattern;
  const ByteLevelBpe cl100k(definition);
  EXPECT_EQ(cl100k.last_safe_cut("he said\nso<|endoftext|>x\ny"), 23u);  // specials only
  // A special token that begins another: "<|a|>" at the end may yet be "<|a|>b".
  definition.pattern = kGpt2Pattern;
  for (const char* special : {"<|a|>", "<|a|>b"}) {
    definition.tokens.push_back(special);
    definition.used.push_back(true);
    definition.specials.push_back(TokenId(definition.tokens.size() - 1));
  }
  const ByteLevelBpe nested(definition);
  EXPECT_EQ(nested.last_safe_cut("x<|a|>"), 0u);
  EXPECT_EQ(nested.last_safe_cut("x<|a|>yy"), 0u);  // nor while "<|endoftext|>" (13) could fit
  EXPECT_EQ(nested.last_safe_cut("x<|a|>" + std::string(13, 'y')), 6u);
  EXPECT_EQ(nested.encode("x<|a|>b", true),
            (std::vector<TokenId>{nested.encode("x", true)[0], *nested.special_token("<|a|>b")}));
}

TEST(ByteLevelBpe, SpecialTokenOnlyWhenAllowed) {
  const ByteLevelBpe bpe(train_byte_level_bpe("hello world", 260, 1));
  const TokenId eot = *bpe.special_token(kEndOfText);
  EXPECT_EQ(eot, 259u);
  EXPECT_EQ(bpe.encode("a<|endoftext|>b", true),
            (std::vector<TokenId>{bpe.encode("a")[0], eot, bpe.encode("b")[0]}));
  EXPECT_EQ(bpe.encode("<|endoftext|>", false).size(), 13u);  // thirteen bytes, no merges
  EXPECT_THROW(bpe.decode(std::vector<TokenId>{9999}), Error);
}

std::string error_of(const std::function<void()>& action) {
  try {
    action();
  } catch (const Error& error) {
    return error.what();
  }
  return "";
}

TEST(TokenizerFiles, RefuseWhatTheyCannotRead) {
  testing::TempDir dir;
  const std::string vocab = R"("vocab": {"a": 0}, "merges": [])";
  std::string deep;  // {"model": {"model": ... 1 ...}}: copied or compared, it overflowed the stack
  for (int level = 0; level < 70000; ++level) deep += R"({"model": )";
  deep += "1" + std::string(70000, '}');
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"{", "not valid JSON"},
      {R"({"model": {"type": "WordPiece", "vocab": {"a": 0}}})", "not a BPE"},
      {R"({"model": {"type": "BPE", )" + vocab + R"(}, "pre_tokenizer": null})", "not ByteLevel"},
      {R"({"model": {"type": "BPE", )" + vocab +
           R"(}, "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": "no"}})",
       "not a tokenizer.json folio understands"},
      {R"({"model": {"type": "BPE", )" + vocab + R"(}, "pre_tokenizer": {"type": "ByteLevel"}})",
       "no token for the byte 0"},
      {R"({"model": {"type": "BPE", "vocab": {"a": 4000000000}, "merges": []},
           "pre_tokenizer": {"type": "ByteLevel"}})",
       "not a small whole number"},
      // Found by fuzz_tokenizer: a model without "vocab" was read through a const json's
      // operator[] (a use after free under AddressSanitizer); a Split without "pattern" the same;
      // an added token's id of -1.5 cast to size_t (undefined behaviour).
      {R"({"model": {"type": "BPE", "merges": []}, "pre_tokenizer": {"type": "ByteLevel"}})",
       "has no vocabulary"},
      {R"({"model": {"type": "BPE", )" + vocab +
           R"(}, "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
             {"type": "Split", "behavior": "Isolated"},
             {"type": "ByteLevel", "use_regex": false}]}})",
       "not ByteLevel"},
      {R"({"model": {"type": "BPE", )" + vocab +
           R"(}, "pre_tokenizer": {"type": "ByteLevel"},
           "added_tokens": [{"id": -1.5, "content": "<|endoftext|>"}]})",
       "not a whole number from 0"},
      // A pattern that does not compile is quoted on one line too (found by fuzz_tokenizer).
      {R"({"model": {"type": "BPE", )" + vocab +
           R"(}, "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
             {"type": "Split", "pattern": {"Regex": "\\p{N}{5,3}|\n"}, "behavior": "Isolated"},
             {"type": "ByteLevel", "use_regex": false}]}})",
       "regex does not compile (numbers out of order in {} quantifier at offset 9): "
       "\\p{N}{5,3}|\\n"},
      // A token's text is quoted on one line: its newline escaped.
      {R"({"model": {"type": "BPE", "vocab": {"a\nb": 0}, "merges": []},
           "pre_tokenizer": {"type": "ByteLevel"}})",
       "the token 'a\\nb' is not in GPT-2's byte alphabet"},
      {deep, "nests its JSON more than 128 levels deep"},
      // HF's lstrip (and rstrip, single_word) move where an added token matches: not implemented.
      {R"({"model": {"type": "BPE", )" + vocab + R"(}, "pre_tokenizer": {"type": "ByteLevel"},
           "added_tokens": [{"id": 1, "content": "<mask>", "lstrip": true}]})",
       "the added token '<mask>' has \"lstrip\": true"},
      // An added token given the id of another token: both are named.
      {R"({"model": {"type": "BPE", "vocab": {"a": 0, "b": 1}, "merges": []},
           "pre_tokenizer": {"type": "ByteLevel"},
           "added_tokens": [{"id": 1, "content": "<x>"}]})",
       "id 1 is given to the added token '<x>' and to the token 'b'"},
  };
  for (const auto& [text, expected] : cases) {
    const std::string path = dir.write("tokenizer.json", text);
    const std::string message = error_of([&] { load_tokenizer(path); });
    EXPECT_NE(message.find(expected), std::string::npos) << text << " -> " << message;
    EXPECT_NE(message.find(path), std::string::npos) << message;
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  }
}

// A checkpoint's tokenizer.json text is read as a file's: nesting is refused there too.
TEST(TokenizerFiles, DeepNestingIsRefusedBeforeItIsBuilt) {
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  const std::string message =
      error_of([&] { read_tokenizer_json_text(deep, "out/ckpt.safetensors's tokenizer"); });
  EXPECT_NE(message.find("out/ckpt.safetensors's tokenizer nests its JSON more than 128 levels"),
            std::string::npos)
      << message;
  // 128 levels are read (as HF reads them): the file is refused for what it is, not its depth.
  const std::string shallow = std::string(127, '[') + "{}" + std::string(127, ']');
  EXPECT_NE(error_of([&] { read_tokenizer_json_text(shallow, "x"); }).find("model is not a BPE"),
            std::string::npos);
}

// Added tokens as HF tokenizers loads them (tests/tokenizer/test_gpt2_tokenizer.py compares the
// ids with HF's): one with empty content is skipped; one spelled like a vocabulary token is that
// token, with the vocabulary's id, and the merges still make it.
TEST(TokenizerFiles, AddedTokensAreReadAsHfReadsThem) {
  testing::TempDir dir;
  const ByteLevelBpe trained(train_byte_level_bpe("ab ab ab abc abc", 300, 1));
  const BpeDefinition& d = trained.definition();
  const auto ab = std::find(d.tokens.begin(), d.tokens.end(), "ab");
  ASSERT_NE(ab, d.tokens.end());
  const TokenId ab_id = TokenId(ab - d.tokens.begin());
  const auto with_added = [&](const std::string& content, size_t id) {
    nlohmann::json file = nlohmann::json::parse(tokenizer_json_text(d));
    file["added_tokens"].push_back({{"id", id}, {"content", content}, {"special", true}});
    return load_tokenizer(dir.write("tokenizer.json", file.dump()));
  };
  const std::string text = "xab abc<|endoftext|>ab";
  const ByteLevelBpe empty = with_added("", d.tokens.size());
  EXPECT_EQ(empty.vocab_size(), trained.vocab_size());
  EXPECT_EQ(empty.encode(text, true), trained.encode(text, true));
  const ByteLevelBpe spelled_alike = with_added("ab", d.tokens.size());
  EXPECT_EQ(spelled_alike.special_token("ab"), ab_id);
  EXPECT_EQ(spelled_alike.encode("xab", true),
            (std::vector<TokenId>{trained.encode("x")[0], ab_id}));
  EXPECT_EQ(spelled_alike.encode(" abc"), trained.encode(" abc"));  // merges reach "ab" still
  // A definition made otherwise, with an empty special token, encodes too (it matched at every
  // place and encode never moved on).
  BpeDefinition with_empty = d;
  with_empty.tokens.push_back("");
  with_empty.used.push_back(true);
  with_empty.specials.push_back(TokenId(with_empty.tokens.size() - 1));
  const ByteLevelBpe guarded(with_empty);
  EXPECT_EQ(guarded.encode(text, true), trained.encode(text, true));
  EXPECT_EQ(guarded.last_safe_cut(text), trained.last_safe_cut(text));
}

// A tokenizer.json written by folio reads back as the same tokenizer, for GPT-2's pattern (a
// ByteLevel pre-tokenizer) and for any other (a Split, then a ByteLevel without regex): what
// checkpoints, `folio prepare` and `folio export` store. (HF tokenizers loading the same file is
// tests/tokenizer/test_gpt2_tokenizer.py's.)
TEST(TokenizerFiles, AnyPatternRoundTripsThroughTokenizerJson) {
  std::string text;
  for (int i = 0; i < 2000; ++i) text += "Line " + std::to_string(i) + ", said he!\n";
  const std::string cl100k = kCl100kPattern;
  for (const std::string& pattern : {std::string(kGpt2Pattern), cl100k}) {
    BpeDefinition written = train_byte_level_bpe(text, 300, 1);
    written.pattern = pattern;
    const std::string json = tokenizer_json_text(written);
    const BpeDefinition read = read_tokenizer_json_text(json, "written.json");
    EXPECT_EQ(read.pattern, pattern);
    EXPECT_EQ(read.tokens, written.tokens);
    EXPECT_EQ(read.used, written.used);
    EXPECT_EQ(read.merges, written.merges);
    EXPECT_EQ(read.specials, written.specials);
    EXPECT_EQ(read.ignore_merges, written.ignore_merges);
    // The pattern decides the ids: cl100k keeps "!\n" together where GPT-2 splits it.
    const ByteLevelBpe before(written), after(read);
    EXPECT_EQ(after.encode(text), before.encode(text));
    EXPECT_EQ(after.decode(after.encode(text)), text);
  }
}

// ---- token files ----

TEST(TokenFiles, RoundTripBothLayoutsAndWidths) {
  testing::TempDir dir;
  std::vector<uint32_t> ids(1000);
  std::iota(ids.begin(), ids.end(), 40000);
  write_token_file(dir.file("a.bin"), TokenFileLayout::kRawUint16, ids, 50257);
  write_token_file(dir.file("train_000000.bin"), TokenFileLayout::kShard, ids, 50257);
  write_token_file(dir.file("train_000001.bin"), TokenFileLayout::kShard, ids, 128256);
  const TokenFile raw(dir.file("a.bin"), TokenFileLayout::kRawUint16, 50257);
  const TokenFile narrow(dir.file("train_000000.bin"), TokenFileLayout::kShard, 50257);
  const TokenFile wide(dir.file("train_000001.bin"), TokenFileLayout::kShard, 128256);
  ASSERT_EQ(raw.size(), 1000u);
  ASSERT_EQ(narrow.size(), 1000u);
  ASSERT_EQ(wide.size(), 1000u);
  for (size_t i = 0; i < ids.size(); ++i) {
    EXPECT_EQ(raw[i], ids[i]);
    EXPECT_EQ(narrow[i], ids[i]);
    EXPECT_EQ(wide[i], ids[i]);
  }
  EXPECT_EQ(std::filesystem::file_size(dir.file("train_000000.bin")), 1024u + 2000u);
  EXPECT_EQ(std::filesystem::file_size(dir.file("train_000001.bin")), 1024u + 4000u);
  int32_t header[3];
  std::ifstream(dir.file("train_000001.bin"), std::ios::binary)
      .read(reinterpret_cast<char*>(header), 12);
  EXPECT_EQ(header[0], 20240801);
  EXPECT_EQ(header[1], 7);
  EXPECT_EQ(shard_paths(dir.file(""), "train"),
            (std::vector<std::string>{dir.file("train_000000.bin"), dir.file("train_000001.bin")}));
  EXPECT_NE(error_of([&] {
              write_token_file(dir.file("b.bin"), TokenFileLayout::kRawUint16, ids, 128256);
            }).find("uint16"),
            std::string::npos);
}

TEST(TokenFiles, DamageGetsOneErrorNamingTheFileAndTheFix) {
  testing::TempDir dir;
  const std::vector<uint32_t> ids = {1, 2, 3, 50000};
  const std::string good = dir.file("good.bin");
  write_token_file(good, TokenFileLayout::kShard, ids, 50257);
  std::string bytes;
  {
    std::ifstream in(good, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  struct Case {
    std::string name, bytes, expected;
    size_t vocab = 50257;
  };
  std::string wrong_magic = bytes, empty_header = bytes;
  wrong_magic[0] = 7;
  std::memset(&empty_header[8], 0, 4);
  const std::vector<Case> cases = {
      {"magic.bin", wrong_magic, "wrong magic number"},
      {"truncated.bin", bytes.substr(0, bytes.size() - 1), "truncated"},
      {"header_only.bin", bytes.substr(0, 100), "cut short"},
      {"empty.bin", "", "empty"},
      {"no_tokens.bin", empty_header.substr(0, 1024), "no tokens"},
      {"vocab.bin", bytes, "not below the vocabulary size 50000", 50000},
  };
  for (const Case& c : cases) {
    const std::string path = dir.write(c.name, c.bytes);
    const std::string message =
        error_of([&] { TokenFile(path, TokenFileLayout::kShard, c.vocab); });
    EXPECT_NE(message.find(c.expected), std::string::npos) << c.name << ": " << message;
    EXPECT_NE(message.find(path), std::string::npos) << message;
    EXPECT_NE(message.find("folio prepare"), std::string::npos) << message;
  }
  const std::string odd = dir.write("odd.bin", "abc");
  EXPECT_NE(error_of([&] { TokenFile(odd, TokenFileLayout::kRawUint16, 50257); }).find("cut short"),
            std::string::npos);
}

}  // namespace
}  // namespace folio

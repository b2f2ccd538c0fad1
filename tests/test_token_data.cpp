// Training on token files: batches drawn from memory-mapped shards equal batches drawn from the
// same ids in memory (every sampler, windows across shard boundaries, uint16 and uint32 files);
// the tokenizer interface (streaming decode of characters split over tokens, the checkpoint's
// copy of a BPE tokenizer, generation stopping at <|endoftext|>); a token folder's errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <random>

#include "backend/backend.h"
#include "config/presets.h"
#include "data/batches.h"
#include "data/corpus_reader.h"
#include "data/dataset.h"
#include "data/epoch_sampler.h"
#include "data/text_tokens.h"
#include "data/token_shards.h"
#include "io/checkpoint.h"
#include "io/training_state.h"
#include "model/generate.h"
#include "model/gpt.h"
#include "test_helpers.h"
#include "tokenizer/bpe_trainer.h"
#include "tokenizer/byte_level_bpe.h"
#include "tokenizer/pretokenizer.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_files.h"

namespace folio {
namespace {

using testing::error_message;

std::vector<uint32_t> random_ids(size_t n, uint32_t below, uint32_t seed) {
  std::mt19937 generator(seed);
  std::vector<uint32_t> ids(n);
  for (uint32_t& id : ids) id = generator() % below;
  return ids;
}

// Writes `ids` as shards of the given sizes (the last takes the rest); returns the files opened.
std::vector<TokenFile> write_shards(const testing::TempDir& dir, const std::string& split,
                                    const std::vector<uint32_t>& ids,
                                    const std::vector<size_t>& sizes, size_t vocab) {
  std::vector<TokenFile> files;
  size_t start = 0;
  for (size_t k = 0; k <= sizes.size(); ++k) {
    const size_t count = k < sizes.size() ? sizes[k] : ids.size() - start;
    const std::string path = dir.file(split + "_00000" + std::to_string(k) + ".bin");
    write_token_file(path, TokenFileLayout::kShard,
                     std::span<const uint32_t>(ids).subspan(start, count), vocab);
    files.emplace_back(path, TokenFileLayout::kShard, vocab);
    start += count;
  }
  return files;
}

void expect_same_batches(const TokenSequence& mapped, const TokenSequence& memory) {
  ASSERT_EQ(mapped.size(), memory.size());
  const int B = 8, T = 64;
  Batch from_files(B, T), from_memory(B, T);
  for (uint32_t step = 0; step < 20; ++step) {
    fill_random_batch(from_files, mapped, 1337, RandomPurpose::kTrainBatch, step, 3 * step);
    fill_random_batch(from_memory, memory, 1337, RandomPurpose::kTrainBatch, step, 3 * step);
    ASSERT_EQ(from_files.inputs, from_memory.inputs) << "random, step " << step;
    ASSERT_EQ(from_files.targets, from_memory.targets) << "random, step " << step;
  }
  EpochSampler epoch_files(mapped, T, 7), epoch_memory(memory, T, 7);
  for (uint64_t position = 0; position < 2 * epoch_files.windows_per_epoch(); position += 997) {
    epoch_files.fill(from_files, position);
    epoch_memory.fill(from_memory, position);
    ASSERT_EQ(from_files.inputs, from_memory.inputs) << "epoch, position " << position;
    ASSERT_EQ(from_files.targets, from_memory.targets) << "epoch, position " << position;
  }
  for (size_t first = 0; first < consecutive_window_count(mapped.size(), T); first += B) {
    ASSERT_EQ(fill_consecutive_batch(from_files, mapped, first),
              fill_consecutive_batch(from_memory, memory, first));
    ASSERT_EQ(from_files.inputs, from_memory.inputs) << "consecutive, window " << first;
    ASSERT_EQ(from_files.targets, from_memory.targets) << "consecutive, window " << first;
  }
}

// sampling=epoch: each epoch visits every window exactly once, epochs and seeds shuffle
// differently, and the order is far from the identity; at window counts around the network's
// domain sizes (4, 16, 64, 4096: exactly 4^h, one more, one less) and a few odd ones.
TEST(EpochSampler, EachEpochVisitsEveryWindowOnceInItsOwnOrder) {
  const int T = 8;
  for (uint64_t windows : {1, 2, 3, 4, 5, 15, 16, 17, 63, 64, 65, 1000, 4095, 4096, 4097}) {
    SCOPED_TRACE(::testing::Message() << windows << " windows");
    const std::vector<int32_t> ids(windows + T, 0);
    const EpochSampler sampler(ids, T, 7), same_seed(ids, T, 7), other_seed(ids, T, 8);
    ASSERT_EQ(sampler.windows_per_epoch(), windows);
    std::vector<std::vector<uint64_t>> orders;
    for (uint64_t epoch = 0; epoch < 3; ++epoch) {
      std::vector<uint64_t> order, seen(windows, 0);
      for (uint64_t i = 0; i < windows; ++i) {
        const uint64_t w = sampler.shuffle(epoch, i);
        ASSERT_LT(w, windows);
        ++seen[w];
        order.push_back(w);
        ASSERT_EQ(sampler.window_start(epoch * windows + i), w);
        ASSERT_EQ(same_seed.shuffle(epoch, i), w);
      }
      EXPECT_EQ(std::count(seen.begin(), seen.end(), 1), int64_t(windows)) << "epoch " << epoch;
      orders.push_back(order);
    }
    if (windows < 16) continue;
    EXPECT_NE(orders[0], orders[1]);
    EXPECT_NE(orders[1], orders[2]);
    std::vector<uint64_t> other;
    for (uint64_t i = 0; i < windows; ++i) other.push_back(other_seed.shuffle(0, i));
    EXPECT_NE(other, orders[0]);
    // Far from the identity: few windows in place, few runs of neighbours, as for a random
    // permutation (about 1 and 1 expected).
    int in_place = 0, neighbours = 0;
    for (uint64_t i = 0; i < windows; ++i) {
      in_place += orders[0][i] == i;
      if (i > 0) neighbours += orders[0][i] == orders[0][i - 1] + 1;
    }
    EXPECT_LE(in_place, 8);
    EXPECT_LE(neighbours, 8);
  }
}

TEST(TokenData, BatchesFromMappedShardsEqualBatchesFromTheSameIdsInMemory) {
  testing::TempDir dir;
  for (const size_t vocab : {size_t(50257), size_t(70000)}) {  // uint16 and uint32 shards
    const std::vector<uint32_t> ids = random_ids(5000, uint32_t(vocab), uint32_t(vocab));
    const std::vector<int32_t> in_memory(ids.begin(), ids.end());
    // Shards of 1234, 40 (shorter than a window) and 3726 tokens: windows cross both boundaries.
    const std::vector<TokenFile> files =
        write_shards(dir, "v" + std::to_string(vocab), ids, {1234, 40}, vocab);
    const TokenSequence mapped({&files[0], &files[1], &files[2]});
    std::vector<int32_t> across(100);
    mapped.copy(1200, 100, across.data());  // from shard 0 through shard 1 into shard 2
    EXPECT_TRUE(std::equal(across.begin(), across.end(), in_memory.begin() + 1200));
    expect_same_batches(mapped, TokenSequence(in_memory));
  }
  // nanoGPT's raw uint16 file, one for the whole split.
  const std::vector<uint32_t> ids = random_ids(3000, 50257, 5);
  write_token_file(dir.file("train.bin"), TokenFileLayout::kRawUint16, ids, 50257);
  const TokenFile raw(dir.file("train.bin"), TokenFileLayout::kRawUint16, 50257);
  const std::vector<int32_t> in_memory(ids.begin(), ids.end());
  expect_same_batches(TokenSequence({&raw}), TokenSequence(in_memory));
}

// A BPE of GPT-2's kind with no merges: every byte its own token, so a character of several
// bytes spans several tokens; <|endoftext|> is id 256.
Tokenizer bytes_only_bpe() {
  return Tokenizer(std::make_shared<const ByteLevelBpe>(train_byte_level_bpe("abc", 257, 1)));
}

TEST(TokenizerInterface, StreamingDecodePrintsCharactersWhole) {
  const Tokenizer tokenizer = bytes_only_bpe();
  ASSERT_EQ(tokenizer.size(), 257);
  ASSERT_EQ(tokenizer.end_of_text(), 256);
  const std::string text = "caf\u00e9 \u65e5\u672c \U0001F600!";
  const std::vector<int32_t> ids = tokenizer.encode(text, "text");
  ASSERT_EQ(ids.size(), text.size());  // one token per byte
  StreamingDecoder decoder(tokenizer);
  std::string printed;
  for (int32_t id : ids) {
    const std::string piece = decoder.push(id);
    // Each piece is whole characters: it starts with no continuation byte and decodes alone.
    if (!piece.empty()) {
      EXPECT_NE(static_cast<unsigned char>(piece[0]) & 0xC0, 0x80) << printed;
    }
    EXPECT_EQ(tokenizer.decode(tokenizer.encode(piece, "piece")), piece);
    printed += piece;
  }
  EXPECT_EQ(printed + decoder.finish(), text);
  // The bytes of a character never completed come out at the end; an invalid byte at once.
  StreamingDecoder cut(tokenizer);
  EXPECT_EQ(cut.push(tokenizer.encode("\xE6", "x")[0]), "");
  EXPECT_EQ(cut.finish(), "\xE6");
  StreamingDecoder invalid(tokenizer);
  EXPECT_EQ(invalid.push(tokenizer.encode("\xFF", "x")[0]), "\xFF");
  // Characters: each id is one whole character.
  const Tokenizer characters = Vocabulary::from_text(U"\n\u00e9a");
  StreamingDecoder char_decoder(characters);
  EXPECT_EQ(char_decoder.push(1), "a");
  EXPECT_EQ(char_decoder.push(2), "\u00e9");
  EXPECT_EQ(characters.start_token(), 0);
  EXPECT_EQ(tokenizer.start_token(), 256);
}

TEST(TokenizerInterface, CheckpointsAndTrainingStatesCarryTheBpeTokenizerAndGiveIt) {
  testing::TempDir dir;
  auto backend = make_backend("cpu", 1);
  const Tokenizer tokenizer(std::make_shared<const ByteLevelBpe>(
      train_byte_level_bpe("to be or not to be, that is the question", 280, 1)));
  Config config = load_config("tiny");
  GPT model(*backend, ModelShape::from_config(config, tokenizer.size()));
  model.initialize(config.seed, config.init_std, false);
  save_checkpoint(dir.file("ckpt.safetensors"), model, config, tokenizer, 1, 2, 3);
  const LoadedCheckpoint loaded = load_checkpoint(dir.file("ckpt.safetensors"), Config{}, nullptr);
  EXPECT_FALSE(loaded.tokenizer.is_characters());
  EXPECT_TRUE(loaded.tokenizer == tokenizer);
  EXPECT_EQ(loaded.tokenizer.encode("not the question", "x"),
            tokenizer.encode("not the question", "x"));
  EXPECT_EQ(loaded.shape.vocab_size, tokenizer.size());
  // Another BPE of the same size is not the same tokenizer.
  const Tokenizer other(std::make_shared<const ByteLevelBpe>(
      train_byte_level_bpe("quite another text, with other merges in it", 280, 1)));
  EXPECT_FALSE(loaded.tokenizer == other);
  EXPECT_EQ(loaded.tokenizer.difference(other).rfind("token ", 0), 0u)  // the first that differs
      << loaded.tokenizer.difference(other);
  EXPECT_FALSE(loaded.tokenizer == Tokenizer(Vocabulary::from_text(U"ab")));

  TrainingState state;
  state.config = config;
  state.tokenizer = tokenizer;
  state.data_sha256 = "identity";
  state.parameters = state.first_moment = state.second_moment = model.read_parameters();
  save_training_state(dir.file("state.safetensors"), state);
  EXPECT_TRUE(load_training_state(dir.file("state.safetensors")).tokenizer == tokenizer);

  // Either file as --tokenizer (folio prepare, tokenize, train): the tokenizer it keeps.
  for (const char* file : {"ckpt.safetensors", "state.safetensors"}) {
    SCOPED_TRACE(file);
    const Tokenizer given = Tokenizer::load(dir.file(file));
    EXPECT_TRUE(given == tokenizer);
    EXPECT_EQ(given.encode("not the question", "x"), tokenizer.encode("not the question", "x"));
  }
}

// What --tokenizer CKPT refuses: a char model has no BPE to give, a safetensors file of another
// tool holds no tokenizer; and a tokenizer.json starting with white space is not taken for a
// safetensors file (its first 8 bytes read as a header length).
TEST(TokenizerInterface, ACheckpointWithoutBpeGivesNoTokenizer) {
  testing::TempDir dir;
  auto backend = make_backend("cpu", 1);
  const Config config = load_config("tiny");
  GPT char_model(*backend, ModelShape::from_config(config, 3));
  save_checkpoint(dir.file("chars.safetensors"), char_model, config,
                  Tokenizer(Vocabulary::from_text(U"ab\n")), 1, 2, 3);
  const std::string char_error =
      error_message([&] { Tokenizer::load(dir.file("chars.safetensors")); });
  EXPECT_NE(char_error.find("chars.safetensors is a character-level model"), std::string::npos)
      << char_error;
  const float weight[2] = {1, 2};
  write_safetensors(dir.file("model.safetensors"), {TensorToWrite("wte.weight", {2}, weight)}, {});
  const std::string hf_error =
      error_message([&] { Tokenizer::load(dir.file("model.safetensors")); });
  EXPECT_NE(hf_error.find("model.safetensors holds no tokenizer"), std::string::npos) << hf_error;

  const Tokenizer tokenizer(
      std::make_shared<const ByteLevelBpe>(train_byte_level_bpe("to be or not to be", 270, 1)));
  const std::string json = dir.write("spaced.json", "        " + tokenizer.tokenizer_json());
  EXPECT_TRUE(Tokenizer::load(json) == tokenizer);
}

TEST(TokenizerInterface, GenerationStopsAtTheStopToken) {
  auto backend = make_backend("cpu", 1);
  const Config c = load_config("tiny");
  GPT model(*backend, ModelShape::from_config(c, 65));
  model.initialize(c.seed, 0.5, false);
  SamplingOptions options;
  options.temperature = 0;
  options.max_new_tokens = 5;
  const std::vector<int32_t> free_run = generate(model, {3}, options, 0, nullptr);
  ASSERT_EQ(free_run.size(), 6u);
  options.stop_token = free_run[3];  // the third token drawn
  int passed_on = 0;
  const std::vector<int32_t> stopped =
      generate(model, {3}, options, 0, [&](int32_t) { ++passed_on; });
  EXPECT_EQ(stopped, std::vector<int32_t>(free_run.begin(), free_run.begin() + 3));
  EXPECT_EQ(passed_on, 2);
}

// The byte offset after the first `fraction` of the characters of a text held whole, a valid
// UTF-8 character or an invalid byte each counting one: the reference for corpus_character_cut.
size_t whole_text_character_cut(std::string_view text, double fraction) {
  std::vector<size_t> ends;  // where each character ends
  for (size_t at = 0; at < text.size();) {
    const unsigned char lead = text[at];
    const size_t length = lead < 0x80 ? 1 : lead < 0xE0 ? 2 : lead < 0xF0 ? 3 : 4;
    const bool valid = PreTokenizer::valid_utf8_prefix(text.substr(at, length)) == length;
    at += valid ? length : 1;
    ends.push_back(at);
  }
  const size_t characters = size_t(double(ends.size()) * fraction);
  return characters == 0 ? 0 : ends[characters - 1];
}

// `folio prepare` and `folio train --data TEXT --tokenizer` read their text a piece at a time
// (corpus_reader.h, tokenize_corpus): the cut between train and val and every id must be those of
// the whole text in memory, each split encoded at once, for GPT-2's pattern (pieces end at its safe
// newlines and after special tokens) and for cl100k's (after special tokens only), a file and a
// folder of documents, with pieces far smaller than the text's lines, so that pieces grow,
// multi-byte characters and separators fall across them, and an empty document.
TEST(TokenData, ACorpusReadAPieceAtATimeGivesTheIdsOfTheWholeText) {
  testing::TempDir dir;
  std::mt19937 random(5);
  const char* words[] = {"said",
                         " he",
                         "!",
                         "\n",
                         "\n\n",
                         " \n",
                         "caf\xc3\xa9",
                         "\xe6\x97\xa5",
                         "\xf0\x9f\x98\x80",
                         "\xff",
                         "I'm",
                         " 12345",
                         "<|endoftext|>",
                         "  "};
  std::string documents[4];  // the third one empty
  for (int d : {0, 1, 3})
    while (documents[d].size() < 3000) documents[d] += words[random() % std::size(words)];
  documents[3] += std::string(600, 'x');  // a line longer than the pieces
  std::string whole_folder;
  std::filesystem::create_directories(dir.file("docs"));
  for (int d = 0; d < 4; ++d) {
    dir.write("docs/" + std::to_string(d) + ".txt", documents[d]);
    whole_folder += documents[d] + kEndOfText;
  }
  const std::string file = dir.write("corpus.txt", documents[0] + documents[1]);
  BpeDefinition trained = train_byte_level_bpe(whole_folder, 330, 1);
  const std::string cl100k = kCl100kPattern;
  for (const std::string& pattern : {std::string(kGpt2Pattern), cl100k}) {
    BpeDefinition definition = trained;
    definition.pattern = pattern;
    const ByteLevelBpe bpe(definition);
    for (const auto& [data, text] : {std::pair{file, documents[0] + documents[1]},
                                     std::pair{dir.file("docs"), whole_folder}}) {
      const CorpusReader corpus(data);
      ASSERT_EQ(corpus.size(), text.size());
      const size_t expected_cut = whole_text_character_cut(text, 0.9);
      const std::vector<TokenId> expected_train =
          bpe.encode(std::string_view(text).substr(0, expected_cut), true, 1);
      const std::vector<TokenId> expected_val =
          bpe.encode(std::string_view(text).substr(expected_cut), true, 1);
      for (size_t piece_bytes : {5, 64, 1000}) {
        SCOPED_TRACE(::testing::Message() << (pattern == cl100k ? "cl100k" : "gpt2") << ", " << data
                                          << ", pieces of " << piece_bytes);
        const uint64_t cut = corpus_character_cut(corpus, 0.9, piece_bytes);
        EXPECT_EQ(cut, expected_cut);
        std::vector<TokenId> ids[2];
        size_t pieces = 0;
        const uint64_t bounds[3] = {0, cut, corpus.size()};
        for (int s = 0; s < 2; ++s)
          tokenize_corpus(corpus, bounds[s], bounds[s + 1], bpe, 2, piece_bytes,
                          [&](std::vector<TokenId>&& piece) {
                            ids[s].insert(ids[s].end(), piece.begin(), piece.end());
                            ++pieces;
                          });
        EXPECT_EQ(ids[0], expected_train);
        EXPECT_EQ(ids[1], expected_val);
        EXPECT_GT(pieces, 2u);  // read in pieces, not whole
      }
    }
  }
}

// A cut that falls inside the <|endoftext|> after a document moves to its end: cut there, the
// token was in neither split (three of its bytes in train, the rest in val).
TEST(TokenData, ACutInsideASeparatorMovesToItsEnd) {
  testing::TempDir dir;
  std::filesystem::create_directories(dir.file("docs"));
  const std::string first = std::string(100, 'a'), second = std::string(80, 'b');
  dir.write("docs/1.txt", first);
  dir.write("docs/2.txt", second);
  const CorpusReader corpus(dir.file("docs"));
  ASSERT_EQ(corpus.size(), 2 * 13 + 180u);
  EXPECT_EQ(corpus_character_cut(corpus, 0.5, 64), 113u);    // half of 206 is 103, inside
  EXPECT_EQ(corpus_character_cut(corpus, 0.3, 64), 61u);     // in a document: where it falls
  EXPECT_EQ(corpus_character_cut(corpus, 0.486, 64), 100u);  // at its start: val begins with it
}

// A folder's documents are its files and those of its subfolders (they had been skipped in
// silence: a folder whose text was one level down had "no files"), in the order of their paths,
// hidden files and folders left out.
TEST(TokenData, ACorpusFolderReadsItsSubfoldersInPathOrder) {
  testing::TempDir dir;
  for (const char* folder : {"docs/a", "docs/c/d", "docs/.git", "only_below/text"})
    std::filesystem::create_directories(dir.file(folder));
  for (const auto& [name, text] :
       {std::pair{"docs/b.txt", "B"}, {"docs/a/2.txt", "A2"}, {"docs/a/1.txt", "A1"},
        {"docs/c/d/e.txt", "E"}, {"docs/.hidden.txt", "hidden"}, {"docs/.git/HEAD", "git"},
        {"only_below/text/1.txt", "one level down"}})
    dir.write(name, text);
  const auto whole = [](const CorpusReader& corpus) {
    std::string text;
    corpus.read(0, size_t(corpus.size()), text);
    return text;
  };
  const std::string separator = kEndOfText;
  EXPECT_EQ(whole(CorpusReader(dir.file("docs"))),
            "A1" + separator + "A2" + separator + "B" + separator + "E" + separator);
  EXPECT_EQ(whole(CorpusReader(dir.file("only_below"))), "one level down" + separator);
}

TEST(TokenData, AFolderNeedsBothSplitsAndOneTokenizer) {
  testing::TempDir dir;
  const Tokenizer tokenizer = bytes_only_bpe();
  const std::string folder = dir.file("tokens");
  std::filesystem::create_directories(folder);
  const auto load_error = [&](const std::string& spec, const Tokenizer* model = nullptr) {
    return error_message([&] { load_dataset(folder, 0.9, spec, model, "checkpoint c"); });
  };
  EXPECT_NE(load_error("").find("holds no token files"), std::string::npos);
  const std::vector<uint32_t> ids = random_ids(200, 256, 1);
  write_token_file(folder + "/train.bin", TokenFileLayout::kRawUint16, ids, 257);
  EXPECT_NE(load_error("").find("has train.bin but no val.bin"), std::string::npos);
  write_token_file(folder + "/val.bin", TokenFileLayout::kRawUint16, ids, 257);
  EXPECT_NE(load_error("").find("has no tokenizer.json: pass --tokenizer"), std::string::npos);
  // A bare nanoGPT folder takes the model's tokenizer, or --tokenizer.
  EXPECT_EQ(load_dataset(folder, 0.9, "", &tokenizer).train().size(), 200u);
  const std::string tokenizer_file = dir.write("tok.json", tokenizer.tokenizer_json());
  const Dataset data = load_dataset(folder, 0.9, tokenizer_file);
  EXPECT_TRUE(data.tokenizer() == tokenizer);
  EXPECT_EQ(data.val().size(), 200u);
  // A char model cannot read it; a model of another tokenizer is named beside the data's.
  const Tokenizer characters = Vocabulary::from_text(U"ab");
  EXPECT_NE(load_error("", &characters).find("reads characters"), std::string::npos);
  const Tokenizer other(
      std::make_shared<const ByteLevelBpe>(train_byte_level_bpe("abcabc", 259, 1)));
  const std::string mismatch = load_error(tokenizer_file, &other);
  EXPECT_NE(mismatch.find("257 tokens"), std::string::npos) << mismatch;
  EXPECT_NE(mismatch.find("259 tokens"), std::string::npos) << mismatch;
  // The folder's own tokenizer.json and --tokenizer must agree.
  std::filesystem::copy_file(tokenizer_file, folder + "/tokenizer.json");
  EXPECT_NO_THROW(load_dataset(folder, 0.9, ""));
  const std::string other_file = dir.write("other.json", other.tokenizer_json());
  EXPECT_NE(load_error(other_file).find("is not the tokenizer"), std::string::npos);
  // A folder that folio prepare was replacing the files of when it stopped is refused.
  dir.write("tokens/.folio_prepare_incomplete", "");
  EXPECT_NE(load_error("").find("is incomplete"), std::string::npos);
  std::filesystem::remove(folder + "/.folio_prepare_incomplete");
  // Ids beyond the tokenizer: the file is named.
  const std::vector<uint32_t> beyond = {300};
  write_token_file(folder + "/val.bin", TokenFileLayout::kRawUint16, beyond, 301);
  EXPECT_NE(load_error("").find("val.bin"), std::string::npos);
}

}  // namespace
}  // namespace folio

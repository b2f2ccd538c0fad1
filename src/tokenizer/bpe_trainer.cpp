#include "tokenizer/bpe_trainer.h"

#include <omp.h>

#include <chrono>
#include <queue>
#include <unordered_map>

#include "core/error.h"
#include "tokenizer/tokenizer_files.h"

namespace folio {

namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

uint64_t pair_key(TokenId left, TokenId right) {
  return (uint64_t(left) << 32) | right;
}

// Step 1: the distinct pieces of `text` and how often each occurs (views into `text`).
std::unordered_map<std::string_view, int64_t> count_words(std::string_view text, int threads,
                                                          const std::string& pattern) {
  std::vector<std::string_view> stretches;
  const auto add_document = [&](std::string_view document) {
    for (auto cut : ByteLevelBpe::cut_for_threads(document, 1 << 20, pattern))
      stretches.push_back(cut);
  };
  size_t start = 0;
  for (size_t at; (at = text.find(kEndOfText, start)) != std::string_view::npos;) {
    add_document(text.substr(start, at - start));
    start = at + std::string_view(kEndOfText).size();
  }
  add_document(text.substr(start));

  const PreTokenizer pretokenizer(pattern);
  std::vector<std::unordered_map<std::string_view, int64_t>> partial(std::max(1, threads));
#pragma omp parallel num_threads(std::max(1, threads))
  {
    auto& counts = partial[omp_get_thread_num()];
#pragma omp for schedule(dynamic, 1)
    for (size_t k = 0; k < stretches.size(); ++k)
      pretokenizer.split(stretches[k], [&](std::string_view piece) { ++counts[piece]; });
  }
  for (size_t t = 1; t < partial.size(); ++t) {
    for (const auto& [word, count] : partial[t]) partial[0][word] += count;
    partial[t] = {};
  }
  return std::move(partial[0]);
}

struct Candidate {
  int64_t count;
  uint64_t pair;
  // The heap's top is the highest count, and of equal counts the smallest pair.
  bool operator<(const Candidate& other) const {
    return count != other.count ? count < other.count : pair > other.pair;
  }
};

}  // namespace

BpeDefinition train_byte_level_bpe(std::string_view text, size_t vocab_size, int threads,
                                   BpeTrainingReport* report,
                                   const std::function<void(double)>& on_progress,
                                   const std::string& pattern) {
  if (vocab_size < 257)
    throw Error("--vocab_size " + std::to_string(vocab_size) +
                " is too small: a byte-level BPE has 256 byte tokens and <|endoftext|>, so at "
                "least 257");
  BpeTrainingReport local_report;
  BpeTrainingReport& r = report ? *report : local_report;

  const auto count_start = Clock::now();
  const auto word_counts = count_words(text, threads, pattern);
  r.words = word_counts.size();

  BpeDefinition d;
  d.source = "the trained tokenizer";
  d.pattern = pattern;
  d.tokens.resize(256);
  const std::array<TokenId, 256> byte_id = gpt2_byte_order();
  for (int b = 0; b < 256; ++b) d.tokens[byte_id[b]] = std::string(1, char(b));
  std::unordered_map<std::string, TokenId> id_of;
  for (TokenId id = 0; id < 256; ++id) id_of[d.tokens[id]] = id;

  // Step 2: the words as byte tokens, and every adjacent pair's count and words.
  std::vector<std::vector<TokenId>> words;
  std::vector<int64_t> counts;
  for (const auto& [word, count] : word_counts) {
    if (word.size() < 2) continue;
    std::vector<TokenId> symbols;
    for (unsigned char b : word) symbols.push_back(byte_id[b]);
    words.push_back(std::move(symbols));
    counts.push_back(count);
  }
  std::unordered_map<uint64_t, int64_t> pair_count;
  std::unordered_map<uint64_t, std::vector<uint32_t>> words_with;
  const auto note_word = [&](uint64_t pair, uint32_t w) {
    auto& list = words_with[pair];
    if (list.empty() || list.back() != w) list.push_back(w);
  };
  for (uint32_t w = 0; w < words.size(); ++w)
    for (size_t i = 0; i + 1 < words[w].size(); ++i) {
      const uint64_t pair = pair_key(words[w][i], words[w][i + 1]);
      pair_count[pair] += counts[w];
      note_word(pair, w);
    }
  std::priority_queue<Candidate> heap;
  for (const auto& [pair, count] : pair_count)
    if (count > 0) heap.push({count, pair});
  r.count_seconds = seconds_since(count_start);

  // Step 3: merge.
  const auto merge_start = Clock::now();
  const size_t wanted_merges = vocab_size - 257;
  std::vector<uint64_t> touched;
  while (d.tokens.size() + 1 < vocab_size && !heap.empty()) {
    const Candidate top = heap.top();
    heap.pop();
    const int64_t current = pair_count[top.pair];
    if (current != top.count) {  // stale: counts only fall, so re-rank it
      if (current > 0) heap.push({current, top.pair});
      continue;
    }
    const TokenId left = TokenId(top.pair >> 32), right = TokenId(top.pair & 0xFFFFFFFF);
    const std::string merged_bytes = d.tokens[left] + d.tokens[right];
    auto [found, is_new] = id_of.try_emplace(merged_bytes, TokenId(d.tokens.size()));
    const TokenId merged = found->second;
    if (is_new) d.tokens.push_back(merged_bytes);
    d.merges.emplace_back(left, right);

    touched.clear();
    const auto add = [&](TokenId a, TokenId b, int64_t delta, uint32_t w) {
      const uint64_t pair = pair_key(a, b);
      pair_count[pair] += delta;
      if (delta > 0) {
        note_word(pair, w);
        touched.push_back(pair);
      }
    };
    const std::vector<uint32_t> holders = std::move(words_with[top.pair]);
    words_with.erase(top.pair);
    for (uint32_t w : holders) {
      std::vector<TokenId>& s = words[w];
      const int64_t c = counts[w];
      for (size_t i = 0; i + 1 < s.size(); ++i) {
        if (s[i] != left || s[i + 1] != right) continue;
        if (i > 0) add(s[i - 1], left, -c, w), add(s[i - 1], merged, c, w);
        if (i + 2 < s.size()) add(right, s[i + 2], -c, w), add(merged, s[i + 2], c, w);
        s[i] = merged;
        s.erase(s.begin() + i + 1);
      }
    }
    pair_count[top.pair] = 0;
    for (uint64_t pair : touched)
      if (pair_count[pair] > 0) heap.push({pair_count[pair], pair});
    if (on_progress && d.merges.size() % 256 == 0)
      on_progress(double(d.merges.size()) / double(wanted_merges));
  }
  r.merges = d.merges.size();
  r.merge_seconds = seconds_since(merge_start);

  d.tokens.push_back(kEndOfText);
  d.specials.push_back(TokenId(d.tokens.size() - 1));
  d.used.assign(d.tokens.size(), true);
  return d;
}

}  // namespace folio

#include "tokenizer/byte_level_bpe.h"

#include <algorithm>
#include <atomic>
#include <bit>
#include <climits>
#include <cstring>
#include <functional>
#include <queue>

#include <omp.h>

#include "core/error.h"
#include "core/printable.h"
#include "data/utf8.h"

namespace folio {

namespace {

// GPT-2's bytes_to_unicode(): the printable bytes keep their code point, the other 68 bytes
// take U+0100, U+0101, ... in byte order.
std::array<char32_t, 256> byte_alphabet() {
  std::array<char32_t, 256> alphabet{};
  char32_t next_spare = 256;
  for (int b = 0; b < 256; ++b) {
    const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
    alphabet[b] = printable ? char32_t(b) : next_spare++;
  }
  return alphabet;
}

std::atomic<uint64_t> next_instance{1};  // see PieceCacheEntry

const std::array<char32_t, 256>& alphabet() {
  static const std::array<char32_t, 256> table = byte_alphabet();
  return table;
}

}  // namespace

std::string bytes_to_alphabet(std::string_view bytes) {
  std::string text;
  text.reserve(bytes.size() * 2);
  for (unsigned char b : bytes) append_utf8(text, alphabet()[b]);
  return text;
}

std::optional<std::string> alphabet_to_bytes(std::string_view text) {
  static const std::unordered_map<char32_t, unsigned char> inverse = [] {
    std::unordered_map<char32_t, unsigned char> map;
    for (int b = 0; b < 256; ++b) map[alphabet()[b]] = static_cast<unsigned char>(b);
    return map;
  }();
  const std::optional<std::u32string> characters = decode_utf8(text, nullptr, false);
  if (!characters) return std::nullopt;
  std::string bytes;
  for (char32_t c : *characters) {
    const auto found = inverse.find(c);
    if (found == inverse.end()) return std::nullopt;
    bytes += static_cast<char>(found->second);
  }
  return bytes;
}

std::array<TokenId, 256> gpt2_byte_order() {
  std::array<int, 256> bytes;
  for (int b = 0; b < 256; ++b) bytes[b] = b;
  std::sort(bytes.begin(), bytes.end(), [](int x, int y) { return alphabet()[x] < alphabet()[y]; });
  std::array<TokenId, 256> order{};
  for (int id = 0; id < 256; ++id) order[bytes[id]] = id;
  return order;
}

void ByteLevelBpe::PairTable::build(const std::vector<std::pair<TokenId, TokenId>>& pairs,
                                    const std::vector<TokenId>& merged) {
  const int bits = std::max(4, int(std::bit_width(pairs.size() * 2)));
  shift_ = 64 - bits;
  mask_ = (uint64_t(1) << bits) - 1;
  keys_.assign(mask_ + 1, kEmpty);
  values_.assign(mask_ + 1, Merge{});
  for (size_t rank = 0; rank < pairs.size(); ++rank) {
    const uint64_t key = (uint64_t(pairs[rank].first) << 32) | pairs[rank].second;
    uint64_t slot = (key * 0x9E3779B97F4A7C15ull) >> shift_;
    while (keys_[slot] != kEmpty && keys_[slot] != key) slot = (slot + 1) & mask_;
    if (keys_[slot] == key) continue;  // a repeated merge: the first (lowest) rank counts
    keys_[slot] = key;
    values_[slot] = Merge{uint32_t(rank), merged[rank]};
  }
}

namespace {

// The definition's pattern compiled; an error names the file it came from.
PreTokenizer pretokenizer_of(const BpeDefinition& d) {
  try {
    return PreTokenizer(d.pattern);
  } catch (const Error& error) {
    throw Error(d.source.empty() ? std::string(error.what()) : d.source + ": " + error.what());
  }
}

}  // namespace

ByteLevelBpe::ByteLevelBpe(BpeDefinition definition)
    : definition_(std::move(definition)),
      pretokenizer_(pretokenizer_of(definition_)),
      instance_(next_instance++) {
  const BpeDefinition& d = definition_;
  // The ids of the texts that bytes and merges make. Where an added (special) token is spelled
  // like another token of the vocabulary, the vocabulary's: HF's BPE keeps its vocabulary apart
  // from the added tokens.
  std::vector<bool> special(d.tokens.size(), false);
  for (TokenId id : d.specials) special[id] = true;
  std::unordered_map<std::string, TokenId> ids;
  for (TokenId id = 0; id < d.tokens.size(); ++id)
    if (d.used[id] && !special[id]) ids.emplace(d.tokens[id], id);
  for (TokenId id : d.specials) {
    ids.emplace(d.tokens[id], id);
    // An empty special token would match at every place, and next_special's scan would never
    // move on (tokenizer files skip it, as HF does: this guards definitions made otherwise).
    if (!d.tokens[id].empty()) special_texts_.emplace_back(d.tokens[id], id);
  }
  for (int b = 0; b < 256; ++b) {
    const auto found = ids.find(std::string(1, char(b)));
    if (found == ids.end())
      throw Error(d.source + " has no token for the byte " + std::to_string(b) +
                  ": a byte-level BPE vocabulary needs all 256 bytes (is it a byte-level BPE?)");
    byte_token_[b] = found->second;
  }
  std::vector<TokenId> merged(d.merges.size());
  for (size_t rank = 0; rank < d.merges.size(); ++rank) {
    const auto [left, right] = d.merges[rank];
    const auto found = ids.find(d.tokens[left] + d.tokens[right]);
    if (found == ids.end())
      throw Error(d.source + ": merge " + std::to_string(rank + 1) + " ('" +
                  printable(bytes_to_alphabet(d.tokens[left]) + " " +
                            bytes_to_alphabet(d.tokens[right])) +
                  "') makes a token the vocabulary lacks: the vocabulary and merges do not belong "
                  "together");
    merged[rank] = found->second;
  }
  merges_.build(d.merges, merged);
  if (d.ignore_merges) whole_tokens_ = std::move(ids);
  // Longest first, so that one special token that begins another does not hide it.
  std::sort(special_texts_.begin(), special_texts_.end(),
            [](const auto& x, const auto& y) { return x.first.size() > y.first.size(); });
}

std::optional<ByteLevelBpe::SpecialAt> ByteLevelBpe::next_special(std::string_view text,
                                                                  size_t start) const {
  std::optional<SpecialAt> found;
  for (const auto& [special, id] : special_texts_) {
    const size_t at = text.find(special, start);
    if (at != std::string_view::npos && (!found || at < found->at))
      found = SpecialAt{at, special.size(), id};
  }
  return found;
}

size_t ByteLevelBpe::last_safe_cut(std::string_view text) const {
  // After the last special token the scan finds: encode() starts afresh there whatever follows,
  // unless a longer special token that begins with it could end in the text still to come.
  const size_t longest = special_texts_.empty() ? 0 : special_texts_.front().first.size();
  size_t cut = 0;
  for (std::optional<SpecialAt> found;
       (found = next_special(text, cut)) && found->at + longest <= text.size();)
    cut = found->at + found->size;
  // For GPT-2's pattern, cut_for_threads' cut (between a printable ASCII character and a
  // newline) after it, unless a special token could hold that newline and the text after it.
  if (definition_.pattern != kGpt2Pattern) return cut;
  for (const auto& special : special_texts_)
    if (special.first.find('\n') != std::string::npos) return cut;
  for (size_t p = text.size(); p-- > cut + 1;)
    if (text[p] == '\n' && text[p - 1] > ' ' && text[p - 1] < 0x7F) return p;
  return cut;
}

std::optional<TokenId> ByteLevelBpe::special_token(std::string_view text) const {
  for (const auto& [special, id] : special_texts_)
    if (special == text) return id;
  return std::nullopt;
}

void ByteLevelBpe::encode_piece(std::string_view piece, std::vector<TokenId>& out) const {
  if (piece.size() == 1) {
    out.push_back(byte_token_[static_cast<unsigned char>(piece[0])]);
    return;
  }
  if (!whole_tokens_.empty()) {
    const auto found = whole_tokens_.find(std::string(piece));
    if (found != whole_tokens_.end()) {
      out.push_back(found->second);
      return;
    }
  }
  thread_local std::vector<TokenId> symbols;
  symbols.clear();
  for (unsigned char b : piece) symbols.push_back(byte_token_[b]);
  if (symbols.size() > 64) {
    encode_long_piece(symbols);
    out.insert(out.end(), symbols.begin(), symbols.end());
    return;
  }
  // Short pieces (nearly all): rank[i] is the rank of the pair (i, i+1); merge the lowest,
  // leftmost first, and look up again only the two pairs the merge changed.
  constexpr uint32_t kNone = UINT32_MAX;
  uint32_t rank[64];
  const auto rank_at = [&](size_t i) {
    const Merge* merge = merges_.find(symbols[i], symbols[i + 1]);
    return merge ? merge->rank : kNone;
  };
  size_t count = symbols.size();
  for (size_t i = 0; i + 1 < count; ++i) rank[i] = rank_at(i);
  while (count > 1) {
    size_t best = 0;
    for (size_t i = 1; i + 1 < count; ++i)
      if (rank[i] < rank[best]) best = i;
    if (rank[best] == kNone) break;
    symbols[best] = merges_.find(symbols[best], symbols[best + 1])->merged;
    for (size_t i = best + 1; i + 1 < count; ++i) symbols[i] = symbols[i + 1];
    for (size_t i = best + 1; i + 2 < count; ++i) rank[i] = rank[i + 1];
    --count;
    if (best + 1 < count) rank[best] = rank_at(best);
    if (best > 0) rank[best - 1] = rank_at(best - 1);
  }
  out.insert(out.end(), symbols.begin(), symbols.begin() + count);
}

// The same merges for long pieces (a run of 10,000 spaces or digits), in O(n log n): the symbols
// form a linked list and a heap holds every adjacent pair that has a merge, lowest rank and then
// leftmost position first; an entry whose symbols have changed since it was pushed is skipped.
void ByteLevelBpe::encode_long_piece(std::vector<TokenId>& symbols) const {
  const size_t n = symbols.size();
  std::vector<size_t> next(n), previous(n);
  for (size_t i = 0; i < n; ++i) next[i] = i + 1, previous[i] = i - 1;  // n and -1 mean none
  struct Candidate {
    uint32_t rank;
    size_t position;
    TokenId left, right;
    bool operator>(const Candidate& other) const {
      return rank != other.rank ? rank > other.rank : position > other.position;
    }
  };
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> heap;
  const auto push = [&](size_t i) {
    if (i >= n || next[i] >= n) return;
    if (const Merge* merge = merges_.find(symbols[i], symbols[next[i]]))
      heap.push({merge->rank, i, symbols[i], symbols[next[i]]});
  };
  for (size_t i = 0; i + 1 < n; ++i) push(i);
  std::vector<bool> alive(n, true);
  while (!heap.empty()) {
    const Candidate top = heap.top();
    heap.pop();
    const size_t i = top.position;
    if (!alive[i] || next[i] >= n || symbols[i] != top.left || symbols[next[i]] != top.right)
      continue;
    const size_t gone = next[i];
    symbols[i] = merges_.find(top.left, top.right)->merged;
    alive[gone] = false;
    next[i] = next[gone];
    if (next[i] < n) previous[next[i]] = i;
    push(i);
    if (previous[i] < n) push(previous[i]);
  }
  size_t kept = 0;
  for (size_t i = 0; i < n; i = next[i]) symbols[kept++] = symbols[i];
  symbols.resize(kept);
}

namespace {

// Natural text repeats its pieces (" the", " and"), so each thread remembers the ids of the
// short pieces it has encoded: a direct-mapped table, an entry replaced by the next piece that
// hashes to its slot. Entries carry the tokenizer's instance number, so two tokenizers in one
// process never share one.
struct PieceCacheEntry {
  uint64_t instance = 0;
  uint8_t piece_size = 0, id_count = 0;
  char piece[22];
  TokenId ids[6];
};
constexpr size_t kPieceCacheSlots = size_t(1) << 15;

}  // namespace

void ByteLevelBpe::encode_piece_cached(std::string_view piece, std::vector<TokenId>& out) const {
  thread_local std::vector<PieceCacheEntry> cache(kPieceCacheSlots);
  if (piece.size() < 2 || piece.size() > sizeof(PieceCacheEntry::piece)) {
    encode_piece(piece, out);
    return;
  }
  PieceCacheEntry& entry =
      cache[(std::hash<std::string_view>()(piece) ^ instance_) & (kPieceCacheSlots - 1)];
  if (entry.instance == instance_ && entry.piece_size == piece.size() &&
      std::memcmp(entry.piece, piece.data(), piece.size()) == 0) {
    out.insert(out.end(), entry.ids, entry.ids + entry.id_count);
    return;
  }
  const size_t before = out.size();
  encode_piece(piece, out);
  const size_t count = out.size() - before;
  if (count > std::size(entry.ids)) return;
  entry.instance = instance_;
  entry.piece_size = uint8_t(piece.size());
  entry.id_count = uint8_t(count);
  std::memcpy(entry.piece, piece.data(), piece.size());
  std::copy(out.begin() + before, out.end(), entry.ids);
}

void ByteLevelBpe::encode_ordinary(std::string_view text, std::vector<TokenId>& out) const {
  pretokenizer_.split(text, [&](std::string_view piece) { encode_piece_cached(piece, out); });
}

std::vector<std::string_view> ByteLevelBpe::cut_for_threads(std::string_view text,
                                                            size_t target_bytes,
                                                            const std::string& pattern) {
  if (pattern != kGpt2Pattern) return {text};  // e.g. cl100k's pattern keeps "!\n" together
  std::vector<std::string_view> parts;
  size_t start = 0;
  while (text.size() - start > target_bytes) {
    // Cut between a printable ASCII character and a newline: no piece holds both (a piece with
    // a newline is all white space), and the piece before ends with no look-ahead. (After the
    // newline would not do: `\s+(?!\S)` looks past the end of a run of white space.)
    size_t cut = start + target_bytes;
    while (cut < text.size() && !(text[cut] == '\n' && text[cut - 1] > ' ' && text[cut - 1] < 0x7F))
      ++cut;
    if (cut >= text.size()) break;
    parts.push_back(text.substr(start, cut - start));
    start = cut;
  }
  parts.push_back(text.substr(start));
  return parts;
}

// Where the threads' shares of a stretch of ordinary text start (the first at 0). For GPT-2's
// pattern, cut_for_threads' cuts, each a piece boundary of the stretch. For any other pattern
// that never looks back, guesses: the first byte after a run of white space that holds a newline,
// about every target_bytes; a guess need not be a piece boundary (join() finds where the shares'
// pieces meet). A pattern that looks back keeps the stretch whole.
std::vector<size_t> ByteLevelBpe::share_starts(std::string_view stretch,
                                               size_t target_bytes) const {
  std::vector<size_t> starts;
  if (definition_.pattern == kGpt2Pattern) {
    for (std::string_view part : cut_for_threads(stretch, target_bytes))
      starts.push_back(size_t(part.data() - stretch.data()));
    return starts;
  }
  starts.push_back(0);
  if (!pretokenizer_.starts_anywhere()) return starts;
  const auto white = [](char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; };
  for (size_t at = target_bytes; at < stretch.size(); at = starts.back() + target_bytes) {
    const size_t newline = stretch.find('\n', at);
    if (newline == std::string_view::npos) break;
    size_t start = newline + 1;
    while (start < stretch.size() && white(stretch[start])) ++start;
    if (start >= stretch.size()) break;
    starts.push_back(start);
  }
  return starts;
}

// One thread's share of a stretch of ordinary text (or one special token): the ids of the pieces
// split from `from`, up to the first piece that ends at or after `until` (the next share's
// start), with where each piece ends and how many ids precede that end.
struct ByteLevelBpe::Share {
  std::string_view stretch;
  size_t from = 0, until = 0;
  std::optional<TokenId> special;
  std::vector<TokenId> ids;
  std::vector<size_t> piece_ends;  // offsets in stretch, increasing
  std::vector<size_t> ids_before;  // ids.size() after each piece
  size_t end = 0;                  // where the share's last piece ends
};

void ByteLevelBpe::encode_share(Share& share) const {
  if (share.special) {
    share.ids.push_back(*share.special);
    return;
  }
  const bool alone = share.from == 0 && share.until == share.stretch.size();
  share.end = pretokenizer_.split_from(
      share.stretch, share.from, share.until, [&](std::string_view piece) {
        encode_piece_cached(piece, share.ids);
        if (alone) return;  // no other share to meet
        share.piece_ends.push_back(size_t(piece.data() + piece.size() - share.stretch.data()));
        share.ids_before.push_back(share.ids.size());
      });
}

// Appends the ids of `share` that follow `position`, the end of the last piece already taken from
// its stretch, and returns the new end. The share before ran on from this share's start to the
// end of a piece of its own, `position`: a true piece boundary, since it started at one. Where
// this share's split has a piece ending there too, the two splits go on alike from there (a
// split from a boundary is the same whatever came before), and the rest of this share is taken
// as it is. Where it has none (its start cut a piece the true split does not cut, and the two
// never met), the share is split again from `position`.
size_t ByteLevelBpe::join(const Share& share, size_t position, std::vector<TokenId>& all) const {
  if (share.special) {
    all.push_back(*share.special);
    return 0;
  }
  size_t first_id = 0;
  if (position != share.from) {
    if (position >= share.end) return position;  // the share before covered all of this one
    const auto found =
        std::lower_bound(share.piece_ends.begin(), share.piece_ends.end(), position);
    if (found == share.piece_ends.end() || *found != position)
      return pretokenizer_.split_from(share.stretch, position, share.until,
                                      [&](std::string_view piece) {
                                        encode_piece_cached(piece, all);
                                      });
    first_id = share.ids_before[size_t(found - share.piece_ends.begin())];
  }
  all.insert(all.end(), share.ids.begin() + std::ptrdiff_t(first_id), share.ids.end());
  return share.end;
}

std::vector<TokenId> ByteLevelBpe::encode(std::string_view text, bool allow_special, int threads,
                                          const std::function<void(size_t)>& on_bytes) const {
  // The work: shares of stretches of ordinary text, and the special tokens between them.
  std::vector<Share> shares;
  const auto add_text = [&](std::string_view stretch) {
    if (stretch.empty()) return;
    const std::vector<size_t> starts = share_starts(stretch, size_t(1) << 18);
    for (size_t k = 0; k < starts.size(); ++k) {
      Share share;
      share.stretch = stretch;
      share.from = starts[k];
      share.until = k + 1 < starts.size() ? starts[k + 1] : stretch.size();
      shares.push_back(std::move(share));
    }
  };
  size_t start = 0;
  while (allow_special) {
    const std::optional<SpecialAt> found = next_special(text, start);
    if (!found) break;
    add_text(text.substr(start, found->at - start));
    Share special;
    special.special = found->id;
    special.stretch = text.substr(found->at, found->size);
    shares.push_back(std::move(special));
    start = found->at + found->size;
  }
  add_text(text.substr(start));

  // In waves of a few shares per thread: each wave's ids join the result in order (and their
  // memory goes) before the next, and on_bytes hears how far the text is done.
  std::vector<TokenId> all;
  const int team = std::max(1, threads);
  const size_t wave = size_t(team) * 8;
  size_t position = 0;
  for (size_t first = 0; first < shares.size(); first += wave) {
    const size_t last = std::min(first + wave, shares.size());
#pragma omp parallel for schedule(dynamic, 1) num_threads(team)
    for (size_t k = first; k < last; ++k) encode_share(shares[k]);
    for (size_t k = first; k < last; ++k) {
      if (shares[k].from == 0) position = 0;  // a new stretch
      if (shares.size() == 1) {  // nothing to join: the share's ids are the text's
        if (on_bytes) on_bytes(text.size());
        return std::move(shares[k].ids);
      }
      position = join(shares[k], position, all);
      shares[k] = Share{};
    }
    if (on_bytes)  // up to where the next share starts
      on_bytes(last < shares.size()
                   ? size_t(shares[last].stretch.data() + shares[last].from - text.data())
                   : text.size());
  }
  return all;
}

std::string ByteLevelBpe::decode(std::span<const TokenId> ids) const {
  std::string text;
  for (TokenId id : ids) {
    if (id >= definition_.tokens.size() || !definition_.used[id])
      throw Error("token id " + std::to_string(id) + " is not in the tokenizer's vocabulary (" +
                  std::to_string(vocab_size()) +
                  " ids): were these ids made by another tokenizer?");
    text += definition_.tokens[id];
  }
  return text;
}

}  // namespace folio

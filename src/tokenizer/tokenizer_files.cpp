#include "tokenizer/tokenizer_files.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/printable.h"
#include "data/fetch.h"
#include "io/safetensors.h"
#include "io/whole_file.h"

namespace folio {

namespace fs = std::filesystem;

namespace {

constexpr const char* kCheckPath = "check the --tokenizer path and its permissions";
constexpr uint64_t kMaxVocabulary = uint64_t(1) << 24;  // ids beyond are a damaged file

// As serde_json (which HF tokenizers reads with) allows. A tokenizer file nests 4 deep; far
// deeper nesting is a damaged or hostile file, and copying or comparing it would recurse once a
// level until the stack overflows.
constexpr int kMaxJsonDepth = 128;

// `source` names the text in errors (its path, or the checkpoint that stored it).
nlohmann::json parse_json_text(const std::string& text, const std::string& source) {
  // The parser reports the depth of each value it starts: refused there, before the document
  // is built.
  const auto refuse_deep = [&](int depth, nlohmann::json::parse_event_t event, nlohmann::json&) {
    if (depth >= kMaxJsonDepth && (event == nlohmann::json::parse_event_t::object_start ||
                                   event == nlohmann::json::parse_event_t::array_start))
      throw Error(source + " nests its JSON more than " + std::to_string(kMaxJsonDepth) +
                  " levels deep, which no tokenizer does: pass a tokenizer's own file, unedited");
    return true;
  };
  try {
    return nlohmann::json::parse(text, refuse_deep);
  } catch (const nlohmann::json::exception& error) {
    throw Error(source + " is not valid JSON (" + error.what() +
                "): pass a tokenizer's own file, unedited");
  }
}

nlohmann::json parse_json(const std::string& path) {
  return parse_json_text(read_whole_file(path, kCheckPath), path);
}

// Token `text` in GPT-2's byte alphabet as bytes; a token outside the alphabet (an added token
// such as "<pad>" written as plain text) stands for its own UTF-8 bytes when `plain_allowed`.
std::string token_bytes(const std::string& text, const std::string& source, bool plain_allowed) {
  if (std::optional<std::string> bytes = alphabet_to_bytes(text)) return *bytes;
  if (plain_allowed) return text;
  throw Error(source + ": the token '" + printable(text) +
              "' is not in GPT-2's byte alphabet: folio reads byte-level BPE tokenizers only");
}

// Fills tokens/used from a JSON object token -> id; the `plain` tokens (special ones) are text.
void read_vocab(const nlohmann::json& vocab, const std::set<std::string>& plain, BpeDefinition& d) {
  if (!vocab.is_object() || vocab.empty())
    throw Error(d.source +
                " has no vocabulary (an object from token to id): is it a BPE tokenizer?");
  for (const auto& [text, id] : vocab.items()) {
    if (!id.is_number_unsigned() || id.get<uint64_t>() >= kMaxVocabulary)
      throw Error(d.source + ": the id of token '" + printable(text) +
                  "' is not a small whole number");
    const auto index = id.get<size_t>();
    if (index >= d.tokens.size()) d.tokens.resize(index + 1), d.used.resize(index + 1);
    if (d.used[index])
      throw Error(d.source + ": id " + std::to_string(index) + " is given to two tokens");
    d.tokens[index] = token_bytes(text, d.source, plain.count(text) > 0);
    d.used[index] = true;
  }
}

// "left right" (merges.txt, and tokenizer.json before 0.20) or ["left", "right"].
void add_merge(const std::string& left, const std::string& right,
               const std::unordered_map<std::string, TokenId>& ids, BpeDefinition& d) {
  const auto l = ids.find(left), r = ids.find(right);
  if (l == ids.end() || r == ids.end())
    throw Error(d.source + ": merge " + std::to_string(d.merges.size() + 1) + " ('" +
                printable(left + " " + right) +
                "') names a token the vocabulary lacks: the files do not belong together");
  d.merges.emplace_back(l->second, r->second);
}

std::unordered_map<std::string, TokenId> ids_by_text(const nlohmann::json& vocab) {
  std::unordered_map<std::string, TokenId> ids;
  for (const auto& [text, id] : vocab.items()) ids[text] = id.get<TokenId>();
  return ids;
}

void add_merge_line(const std::string& line, const std::unordered_map<std::string, TokenId>& ids,
                    BpeDefinition& d) {
  const size_t space = line.find(' ');
  if (space == std::string::npos || space == 0 || line.find(' ', space + 1) != std::string::npos)
    throw Error(d.source + ": merge " + std::to_string(d.merges.size() + 1) + " ('" +
                printable(line) + "') is not two tokens separated by one space");
  add_merge(line.substr(0, space), line.substr(space + 1), ids, d);
}

}  // namespace

BpeDefinition read_vocab_and_merges(const std::string& vocab_json, const std::string& merges) {
  BpeDefinition d;
  d.source = vocab_json + " + " + merges;
  const nlohmann::json vocab = parse_json(vocab_json);
  read_vocab(vocab, {kEndOfText}, d);
  const auto ids = ids_by_text(vocab);
  std::istringstream lines(read_whole_file(merges, kCheckPath));
  std::string line;
  while (std::getline(lines, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty() || line.rfind("#version", 0) == 0) continue;
    add_merge_line(line, ids, d);
  }
  if (const auto eot = ids.find(kEndOfText); eot != ids.end()) d.specials.push_back(eot->second);
  return d;
}

namespace {

// object[key] by reference, or null where it is absent: value() would copy it (the vocabulary's
// 50,257 entries), and operator[] on a const json without the key is undefined behaviour.
const nlohmann::json& member(const nlohmann::json& object, const char* key) {
  static const nlohmann::json absent;
  const auto found = object.find(key);  // end() for a value that is not an object
  return found != object.end() ? *found : absent;
}

// The added tokens as HF tokenizers reads them, into `d` after its vocabulary (`vocab`, the
// file's object from token to id):
//   - one with empty content is skipped, as HF's AddedVocabulary skips it (it would match at
//     every place in a text);
//   - one spelled like a vocabulary token is that token: HF gives it the vocabulary's id,
//     whatever id the file says;
//   - any other takes its id, which no other token may have;
//   - a repeat is read once.
// HF's lstrip, rstrip and single_word change where an added token matches; folio matches the
// token's text alone, so a file that sets them is refused rather than encoded otherwise than HF.
void read_added_tokens(const nlohmann::json& added_tokens, const nlohmann::json& vocab,
                       BpeDefinition& d) {
  for (const nlohmann::json& added : added_tokens) {
    const auto text = added.at("content").get<std::string>();
    if (text.empty()) continue;
    for (const char* flag : {"lstrip", "rstrip", "single_word"})
      if (added.value(flag, false))
        throw Error(d.source + ": the added token '" + printable(text) + "' has \"" + flag +
                    "\": true, which changes where HF matches it and folio does not implement: "
                    "pass a tokenizer.json whose added tokens have lstrip, rstrip and single_word "
                    "false");
    // is_number_unsigned first: get<size_t> of -1.5 or 1e30 is a cast C++ leaves undefined
    if (!added.at("id").is_number_unsigned())
      throw Error(d.source + ": the id of the added token '" + printable(text) +
                  "' is not a whole number from 0");
    uint64_t id = added.at("id").get<uint64_t>();
    if (const auto in_vocab = vocab.find(text); in_vocab != vocab.end()) {
      id = in_vocab->get<uint64_t>();
    } else {
      if (id >= kMaxVocabulary)
        throw Error(d.source + ": the id of the added token '" + printable(text) +
                    "' is over 16 million");
      if (id < d.tokens.size() && d.used[id] && d.tokens[id] != text)
        throw Error(d.source + ": id " + std::to_string(id) + " is given to the added token '" +
                    printable(text) + "' and to the token '" + printable(d.tokens[id]) +
                    "': give the added token an id of its own");
      if (id >= d.tokens.size()) d.tokens.resize(id + 1), d.used.resize(id + 1);
    }
    d.tokens[id] = text;  // added tokens are plain text, not in the byte alphabet
    d.used[id] = true;
    if (std::find(d.specials.begin(), d.specials.end(), TokenId(id)) == d.specials.end())
      d.specials.push_back(TokenId(id));
  }
}

BpeDefinition parse_tokenizer_json(const std::string& text, const std::string& path) {
  BpeDefinition d;
  d.source = path;
  const nlohmann::json file = parse_json_text(text, path);
  const auto refuse = [&](const std::string& what) {
    return Error(path + ": " + what +
                 "; folio reads byte-level BPE tokenizers (GPT-2's kind): pass another "
                 "tokenizer.json, or a folder with encoder.json + vocab.bpe");
  };
  const nlohmann::json& model = member(file, "model");
  if (!model.is_object() || model.value("type", "BPE") != "BPE" || !model.contains("merges"))
    throw refuse("its model is not a BPE");
  for (const char* affix : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    const nlohmann::json& value = member(model, affix);
    if (!value.is_null() && !value.get<std::string>().empty())
      throw refuse("its BPE sets " + std::string(affix));
  }
  if (!member(file, "normalizer").is_null()) throw refuse("it has a normalizer");

  // The pre-tokenizer: ByteLevel with its own (GPT-2's) regex, or a regex Split followed by a
  // ByteLevel without one (the GPT-4 / Llama 3 layout).
  const nlohmann::json& pre = member(file, "pre_tokenizer");
  const auto byte_level = [&](const nlohmann::json& p, bool with_regex) {
    if (!p.is_object() || p.value("type", "") != "ByteLevel") return false;
    if (p.value("add_prefix_space", false))
      throw refuse("its ByteLevel pre-tokenizer adds a prefix space, which folio does not");
    return p.value("use_regex", true) == with_regex;
  };
  const nlohmann::json& sequence = member(pre, "pretokenizers");
  if (byte_level(pre, true)) {
    d.pattern = kGpt2Pattern;
  } else if (pre.is_object() && pre.value("type", "") == "Sequence" && sequence.is_array() &&
             sequence.size() == 2 && sequence[0].value("type", "") == "Split" &&
             sequence[0].value("behavior", "") == "Isolated" &&
             !sequence[0].value("invert", false) &&
             member(sequence[0], "pattern").contains("Regex") && byte_level(sequence[1], false)) {
    d.pattern = sequence[0].at("pattern").at("Regex").get<std::string>();
  } else {
    throw refuse("its pre-tokenizer is not ByteLevel");
  }
  d.ignore_merges = model.value("ignore_merges", false);

  const nlohmann::json& added_tokens = member(file, "added_tokens");
  std::set<std::string> added_texts;
  for (const nlohmann::json& added : added_tokens) added_texts.insert(added.value("content", ""));
  const nlohmann::json& vocab = member(model, "vocab");  // read_vocab refuses a missing one
  read_vocab(vocab, added_texts, d);
  const auto ids = ids_by_text(vocab);
  for (const nlohmann::json& merge : model.at("merges")) {
    if (merge.is_string())
      add_merge_line(merge.get<std::string>(), ids, d);
    else if (merge.is_array() && merge.size() == 2 && merge[0].is_string() && merge[1].is_string())
      add_merge(merge[0].get<std::string>(), merge[1].get<std::string>(), ids, d);
    else
      throw refuse("a merge is neither \"a b\" nor [\"a\", \"b\"]");
  }
  read_added_tokens(added_tokens, vocab, d);
  return d;
}

}  // namespace

BpeDefinition read_tokenizer_json(const std::string& path) {
  return read_tokenizer_json_text(read_whole_file(path, kCheckPath), path);
}

BpeDefinition read_tokenizer_json_text(const std::string& text, const std::string& path) {
  try {
    return parse_tokenizer_json(text, path);
  } catch (const nlohmann::json::exception& error) {
    // A field of the wrong type, or a missing one.
    throw Error(path + " is not a tokenizer.json folio understands (" + error.what() +
                "): pass the file as the tokenizers library saved it");
  }
}

std::string tokenizer_json_text(const BpeDefinition& d) {
  using ordered = nlohmann::ordered_json;
  // In id order; where two ids share a text (a special token spelled like a byte string), the
  // entry stays where the first put it and takes the last id, as assigning by key does.
  // ordered_json finds a key by a linear search, which made 50,257 assignments take over a
  // second: the entries are appended to its vector, and a hash map finds a text's entry.
  ordered vocab = ordered::object();
  auto& entries = static_cast<std::vector<std::pair<const std::string, ordered>>&>(
      vocab.get_ref<ordered::object_t&>());
  std::unordered_map<std::string, size_t> entry_of_text;
  std::vector<bool> special(d.tokens.size(), false);
  for (TokenId id : d.specials) special[id] = true;
  for (TokenId id = 0; id < d.tokens.size(); ++id) {
    if (!d.used[id]) continue;
    std::string text = special[id] ? d.tokens[id] : bytes_to_alphabet(d.tokens[id]);
    const auto [found, added] = entry_of_text.emplace(text, entries.size());
    if (added)
      entries.emplace_back(std::move(text), id);
    else
      entries[found->second].second = id;
  }
  ordered merges = ordered::array();
  for (const auto& [left, right] : d.merges)
    merges.push_back(bytes_to_alphabet(d.tokens[left]) + " " + bytes_to_alphabet(d.tokens[right]));
  ordered added = ordered::array();
  for (TokenId id : d.specials)
    added.push_back({{"id", id},
                     {"content", d.tokens[id]},
                     {"single_word", false},
                     {"lstrip", false},
                     {"rstrip", false},
                     {"normalized", false},
                     {"special", true}});
  // GPT-2's regex is ByteLevel's own; any other goes in a Split before a ByteLevel that splits
  // no further: the layout in which HF saves GPT-4's and Llama 3's tokenizers, and which
  // parse_tokenizer_json reads back to the same pattern.
  const auto byte_level = [](bool use_regex) {
    return ordered{{"type", "ByteLevel"},
                   {"add_prefix_space", false},
                   {"trim_offsets", true},
                   {"use_regex", use_regex}};
  };
  ordered pre_tokenizer = byte_level(true);
  if (d.pattern != kGpt2Pattern) {
    const ordered split = {{"type", "Split"},
                           {"pattern", {{"Regex", d.pattern}}},
                           {"behavior", "Isolated"},
                           {"invert", false}};
    pre_tokenizer = {{"type", "Sequence"},
                     {"pretokenizers", ordered::array({split, byte_level(false)})}};
  }
  ordered file = {{"version", "1.0"},
                  {"truncation", nullptr},
                  {"padding", nullptr},
                  {"added_tokens", added},
                  {"normalizer", nullptr},
                  {"pre_tokenizer", pre_tokenizer},
                  {"post_processor", nullptr},
                  {"decoder", byte_level(true)},
                  {"model",
                   {{"type", "BPE"},
                    {"dropout", nullptr},
                    {"unk_token", nullptr},
                    {"continuing_subword_prefix", ""},
                    {"end_of_word_suffix", ""},
                    {"fuse_unk", false},
                    {"byte_fallback", false},
                    {"ignore_merges", d.ignore_merges},
                    {"vocab", vocab},
                    {"merges", merges}}}};
  return file.dump(1) + "\n";
}

std::string gpt2_tokenizer_dir() {
  std::string base;
  if (const char* folio = std::getenv("FOLIO_CACHE_DIR"); folio && *folio)
    base = folio;
  else if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg)
    base = std::string(xdg) + "/folio";
  else if (const char* home = std::getenv("HOME"); home && *home)
    base = std::string(home) + "/.cache/folio";
  else
    base = ".cache/folio";
  const std::string dir = base + "/gpt2";
  const struct {
    const char *name, *url, *sha256;
  } files[] = {{"encoder.json", kGpt2EncoderUrl, kGpt2EncoderSha256},
               {"vocab.bpe", kGpt2MergesUrl, kGpt2MergesSha256}};
  for (const auto& file : files) {
    const std::string path = dir + "/" + file.name;
    if (fs::exists(path)) continue;
    std::fprintf(stderr, "folio: fetching GPT-2's %s from %s\n", file.name, file.url);
    download_checked(file.url, file.sha256, path,
                     std::string("GPT-2's tokenizer is not in the cache ") + dir +
                         "; put encoder.json and vocab.bpe (from "
                         "https://openaipublic.blob.core.windows.net/gpt-2/encodings/main/) there, "
                         "or pass --tokenizer DIR (a folder with encoder.json + vocab.bpe, or "
                         "vocab.json + merges.txt) or --tokenizer FILE (a tokenizer.json)");
  }
  return dir;
}

ByteLevelBpe load_tokenizer(const std::string& spec) {
  return ByteLevelBpe(load_tokenizer_definition(spec));
}

namespace {

// A safetensors file: its first 8 bytes are the length of the JSON header that follows them
// (little-endian, at most the rest of the file), then the header's '{'. A tokenizer.json starts
// with its '{' or with white space, which read as a length is far beyond any file's size.
bool is_safetensors_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  char start[9] = {};
  if (!in.read(start, sizeof(start)) || start[8] != '{') return false;
  return safetensors_header_length(start) <= fs::file_size(path) - 8;
}

// The tokenizer a folio checkpoint or training state keeps: its tokenizer.json text, in the
// metadata entry `tokenizer` (a char model's has `vocab` instead; io/checkpoint_metadata.h).
BpeDefinition tokenizer_of_safetensors(const std::string& path) {
  const SafetensorsFile file = SafetensorsFile::read(path, DataCheck::kInOnePass);  // its header
  const std::map<std::string, std::string>& metadata = file.metadata();
  if (const auto it = metadata.find("tokenizer"); it != metadata.end())
    return read_tokenizer_json_text(it->second, path + "'s tokenizer");
  if (metadata.count("vocab"))
    throw Error(path +
                " is a character-level model: it has no BPE tokenizer to give (its text is "
                "read as characters, without --tokenizer)");
  throw Error(path +
              " holds no tokenizer (a Hugging Face model.safetensors keeps it beside, in its "
              "folder): pass that folder, a tokenizer.json, or gpt2");
}

}  // namespace

BpeDefinition load_tokenizer_definition(const std::string& spec) {
  if (spec == "gpt2") {
    const std::string dir = gpt2_tokenizer_dir();
    return read_vocab_and_merges(dir + "/encoder.json", dir + "/vocab.bpe");
  }
  if (fs::is_directory(spec)) {
    const fs::path dir(spec);
    if (fs::exists(dir / "encoder.json") && fs::exists(dir / "vocab.bpe"))
      return read_vocab_and_merges(dir / "encoder.json", dir / "vocab.bpe");
    if (fs::exists(dir / "vocab.json") && fs::exists(dir / "merges.txt"))
      return read_vocab_and_merges(dir / "vocab.json", dir / "merges.txt");
    if (fs::exists(dir / "tokenizer.json")) return read_tokenizer_json(dir / "tokenizer.json");
    throw Error("the folder " + spec +
                " holds no tokenizer: it needs encoder.json + vocab.bpe, vocab.json + merges.txt, "
                "or tokenizer.json");
  }
  if (fs::is_regular_file(spec))
    return is_safetensors_file(spec) ? tokenizer_of_safetensors(spec) : read_tokenizer_json(spec);
  throw Error("--tokenizer " + spec +
              " is neither gpt2, a folder nor a file: pass gpt2, a folder with encoder.json + "
              "vocab.bpe (or vocab.json + merges.txt), a tokenizer.json, or a folio checkpoint "
              "of a BPE model");
}

}  // namespace folio

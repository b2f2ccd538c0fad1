// folio tokenize --tokenizer gpt2|DIR|FILE [--data FILE] [--decode] [--threads N]: text to ids
// (one JSON array on one line), or with --decode such an array back to text.
#include <omp.h>

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <iterator>
#include <limits>
#include <sstream>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "core/error.h"
#include "data/token_shards.h"
#include "io/whole_file.h"
#include "tokenizer/tokenizer_files.h"

namespace folio {

namespace {

std::string read_input(const std::optional<std::string>& path) {
  if (path) return read_whole_file(*path, "check the path (--data FILE)");
  std::ostringstream text;
  text << std::cin.rdbuf();
  return text.str();
}

}  // namespace

int tokenize_command(Arguments& arguments) {
  if (arguments.take_flag("help")) {
    std::cout
        << "usage: folio tokenize --tokenizer gpt2|DIR|FILE [--data FILE] [--decode] "
           "[--threads N]\n\n"
           "Prints the token ids of the text in FILE (standard input without --data) as one JSON\n"
           "array on one line; <|endoftext|> in the text is the special token. With --decode it\n"
           "reads such an array and prints the text (exactly its bytes, no newline added), or\n"
           "with --data FILE.bin the token file folio prepare wrote (train.bin, "
           "train_000000.bin).\n"
           "The tokenizer: gpt2 (GPT-2's, fetched once into ~/.cache/folio/gpt2), a folder with\n"
           "encoder.json + vocab.bpe or vocab.json + merges.txt, a tokenizer.json (byte-level\n"
           "BPE), or a folio checkpoint of a BPE model (the tokenizer it keeps). --threads "
           "(default: all cores) encodes long texts in parallel; the ids do not\n"
           "depend on it.\n";
    return 0;
  }
  const std::optional<std::string> spec = arguments.take("tokenizer");
  const std::optional<std::string> data = arguments.take("data");
  const bool decode = arguments.take_flag("decode");
  const std::optional<std::string> threads_text = arguments.take("threads");
  arguments.finish("tokenize", {"tokenizer", "data", "decode", "threads", "help"});
  if (!arguments.positionals().empty())
    throw UsageError("folio tokenize takes no positional arguments ('" +
                     arguments.positionals()[0] + "'): pass the text with --data FILE or on stdin");
  if (!spec) throw UsageError("folio tokenize needs --tokenizer gpt2|DIR|FILE");
  const int threads = parse_threads_option(threads_text);

  const ByteLevelBpe tokenizer = load_tokenizer(*spec);
  if (decode && data && data->ends_with(".bin")) {  // a token file that folio prepare wrote
    const TokenFile tokens(*data, layout_from_name(*data), tokenizer.vocab_size());
    std::vector<TokenId> ids(tokens.size());
    for (size_t i = 0; i < ids.size(); ++i) ids[i] = tokens[i];
    const std::string text = tokenizer.decode(ids);
    std::fwrite(text.data(), 1, text.size(), stdout);
    return 0;
  }
  const std::string input = read_input(data);
  if (decode) {
    std::vector<TokenId> ids;
    try {
      const nlohmann::json array = nlohmann::json::parse(input);
      if (!array.is_array()) throw Error("");
      for (const nlohmann::json& id : array) {
        if (!id.is_number_unsigned() || id.get<uint64_t>() > UINT32_MAX) throw Error("");
        ids.push_back(id.get<TokenId>());
      }
    } catch (const std::exception&) {
      throw Error(
          "--decode reads one JSON array of token ids, e.g. [464, 3290]: the input "
          "is not one");
    }
    const std::string text = tokenizer.decode(ids);
    std::fwrite(text.data(), 1, text.size(), stdout);
    return 0;
  }
  const std::vector<TokenId> ids = tokenizer.encode(input, /*allow_special=*/true, threads);
  // "[464, 3290]": each id written by to_chars into one line sized for the longest ids (a
  // string an id through std::to_string cost 6% of a 2-thread run on an 11 MB text).
  std::string line(2 + ids.size() * (std::numeric_limits<TokenId>::digits10 + 3), '\0');
  char* end = line.data();
  *end++ = '[';
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i > 0) end = std::copy_n(", ", 2, end);
    end = std::to_chars(end, line.data() + line.size(), ids[i]).ptr;
  }
  *end++ = ']';
  line.resize(static_cast<size_t>(end - line.data()));
  line += '\n';
  std::fwrite(line.data(), 1, line.size(), stdout);
  return 0;
}

}  // namespace folio

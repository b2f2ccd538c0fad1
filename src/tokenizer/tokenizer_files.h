// Tokenizer files, read and written:
//   - GPT-2's `encoder.json` + `vocab.bpe`, or the same two as HF names them, `vocab.json` +
//     `merges.txt` (a folder holding either pair);
//   - a Hugging Face `tokenizer.json` whose model is a byte-level BPE (pre-tokenizer ByteLevel,
//     or a regex Split followed by ByteLevel without its own regex; no normalizer);
//   - `gpt2`: GPT-2's two files from their public address, fetched once into a cache folder;
//   - a folio checkpoint or training state of a BPE model (.safetensors), which keeps its
//     tokenizer's tokenizer.json text in its metadata.
// `<|endoftext|>` is the special token where the vocabulary has it (all of GPT-2's do); in a
// tokenizer.json every added token is special.
#pragma once

#include <string>

#include "tokenizer/byte_level_bpe.h"

namespace folio {

inline constexpr const char* kGpt2EncoderUrl =
    "https://openaipublic.blob.core.windows.net/gpt-2/encodings/main/encoder.json";
inline constexpr const char* kGpt2EncoderSha256 =
    "196139668be63f3b5d6574427317ae82f612a97c5d1cdaf36ed2256dbf636783";
inline constexpr const char* kGpt2MergesUrl =
    "https://openaipublic.blob.core.windows.net/gpt-2/encodings/main/vocab.bpe";
inline constexpr const char* kGpt2MergesSha256 =
    "1ce1664773c50f3e0cc8842619a93edc4624525b728b188a9e0be33b7726adc5";

inline constexpr const char* kEndOfText = "<|endoftext|>";

// `spec` is "gpt2", a folder, a tokenizer.json file or a folio checkpoint; the error for anything
// else says which.
ByteLevelBpe load_tokenizer(const std::string& spec);
// The same, the definition only (for a tokenizer to be built once and shared: tokenizer.h).
BpeDefinition load_tokenizer_definition(const std::string& spec);

BpeDefinition read_vocab_and_merges(const std::string& vocab_json, const std::string& merges);
BpeDefinition read_tokenizer_json(const std::string& path);
// A tokenizer.json's text already in memory (e.g. from a checkpoint); `source` names it.
BpeDefinition read_tokenizer_json_text(const std::string& text, const std::string& source);

// A tokenizer.json that HF tokenizers loads as the same tokenizer (vocab, merges in rank order,
// the special tokens as added tokens, ByteLevel decoder, and as pre-tokenizer ByteLevel for
// GPT-2's pattern or a Split by the definition's regex followed by ByteLevel for any other).
std::string tokenizer_json_text(const BpeDefinition& definition);

// The folder that holds GPT-2's encoder.json and vocab.bpe: $FOLIO_CACHE_DIR/gpt2, else
// $XDG_CACHE_HOME/folio/gpt2, else ~/.cache/folio/gpt2. Fetches (sha256 checked) what is absent.
std::string gpt2_tokenizer_dir();

}  // namespace folio

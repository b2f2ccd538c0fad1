// Text generation: the seed's generate() (crop the context to the last block_size tokens, softmax
// of the last position, multinomial draw), plus temperature, top-k and top-p. While the context
// still fits in block_size, a key/value cache (the activations of earlier rows, see
// GPT::forward's first_row) means each new token costs one row of compute, not a full forward.
// Once it no longer fits every position shifts, so each step recomputes the window, as the seed
// (window_shift 1); a larger window_shift moves the window that many tokens at once, recomputes
// it once, and decodes from the cache again until it is full.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "model/gpt.h"

namespace folio {

struct SamplingOptions {
  int max_new_tokens = 500;
  double temperature = 1.0;  // 0: always the most likely token
  int top_k = 0;             // 0: no top-k cut
  double top_p = 1.0;        // 1: no nucleus cut
  uint64_t seed = 1337;
  int32_t stop_token = -1;  // generation ends when it draws this id (not passed on); -1: never
  // Past block_size, how many of the oldest tokens leave the window when it overflows (1 to
  // block_size). 1, the seed's: every token sees the last block_size tokens, and each costs a
  // forward over all of them. K: the window drops to block_size + 1 - K tokens, is recomputed
  // once, and the next K - 1 tokens come from the key/value cache (each token then sees between
  // block_size + 1 - K and block_size tokens before it).
  int window_shift = 1;
};

// The window a generation step computes: context[start, start + T), its rows first_row..T-1 new
// (those before are in the key/value cache). context_size tokens so far; the previous step's
// window began at previous_start with cached_rows of it computed (0 before the first step).
struct GenerationWindow {
  size_t start = 0;
  int T = 0;
  int first_row = 0;
};
GenerationWindow next_generation_window(size_t context_size, size_t previous_start, int cached_rows,
                                        int block_size, int window_shift);

// Draws one token id from logits with the options' temperature / top-k / top-p, using `word`
// (a 64-bit random number) for the draw.
int32_t sample_from_logits(std::vector<float> logits, const SamplingOptions& options,
                           uint64_t word);

// What the model's key/value cache holds after a generate() call: the tokens of the window it
// last computed, from its position 0. A row's keys and values depend only on the tokens up to it
// (causal attention), so a later call whose first window begins with the same tokens reuses those
// rows instead of recomputing them: `folio sample --num_samples N` computes a shared prompt once.
// Valid only while nothing else runs the model and its weights stay the same: the caller keeps it
// beside the model (a trainer, whose steps rewrite both, passes none).
struct KeyValueCacheContents {
  std::vector<int32_t> tokens;
};

// Continues `context` (token ids; empty starts from token 0, the seed's newline) by
// max_new_tokens tokens in `texts` texts at once, calling on_token(text, id) with each token as it
// is drawn. Text i draws from the random stream of sample first_sample + i, so a text is the same
// whether it was drawn alone or beside others (up to the rounding of products over several rows:
// in fp32 the tests find the same tokens). The prompt is computed once; after it every step
// computes one row of every text in one pass (GPT::forward_next_tokens), until the window moves
// past block_size, where each text's window is recomputed on its own. A text that draws
// stop_token ends there; the others go on. `cache`, where given, says what the model's cache
// holds from the last call (empty at first) and is updated. Returns each text, prompt included.
std::vector<std::vector<int32_t>> generate_texts(
    GPT& model, std::vector<int32_t> context, const SamplingOptions& options, uint32_t first_sample,
    int texts, const std::function<void(int text, int32_t id)>& on_token,
    KeyValueCacheContents* cache = nullptr);

// One text: generate_texts of one text, sample `sample_index`.
std::vector<int32_t> generate(GPT& model, std::vector<int32_t> context,
                              const SamplingOptions& options, uint32_t sample_index,
                              const std::function<void(int32_t)>& on_token,
                              KeyValueCacheContents* cache = nullptr);

}  // namespace folio

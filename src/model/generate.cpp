#include "model/generate.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/error.h"
#include "core/philox.h"

namespace folio {

int32_t sample_from_logits(std::vector<float> logits, const SamplingOptions& options,
                           uint64_t word) {
  const int V = static_cast<int>(logits.size());
  // A NaN would make the sort's comparison no ordering at all (undefined behaviour) and the
  // draw meaningless; an infinity gives exp(inf - inf) = NaN below.
  if (!std::all_of(logits.begin(), logits.end(), [](float x) { return std::isfinite(x); }))
    throw Error("the model's next-token scores are not finite: its weights overflow in this "
                "dtype or the checkpoint is damaged; try --dtype fp32, or another checkpoint");
  if (options.temperature <= 0.0)
    return static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
  // Candidates sorted by logit, most likely first (ties: lower id first, for determinism).
  std::vector<int32_t> order(V);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int32_t a, int32_t b) { return logits[a] > logits[b]; });
  int keep = V;
  if (options.top_k > 0) keep = std::min(keep, options.top_k);
  std::vector<double> probabilities(keep);
  const double max_logit = logits[order[0]];
  double total = 0.0;
  for (int i = 0; i < keep; ++i)
    total += probabilities[i] = std::exp((logits[order[i]] - max_logit) / options.temperature);
  if (options.top_p < 1.0) {
    // Smallest prefix whose probability reaches top_p (always at least one token).
    double cumulative = 0.0;
    int cut = 0;
    while (cut < keep) {
      cumulative += probabilities[cut++] / total;
      if (cumulative >= options.top_p) break;
    }
    keep = cut;
    total = std::accumulate(probabilities.begin(), probabilities.begin() + keep, 0.0);
  }
  const double target = static_cast<double>(word >> 11) * 0x1.0p-53 * total;
  double cumulative = 0.0;
  for (int i = 0; i < keep; ++i) {
    cumulative += probabilities[i];
    if (target < cumulative) return order[i];
  }
  return order[keep - 1];
}

GenerationWindow next_generation_window(size_t context_size, size_t previous_start, int cached_rows,
                                        int block_size, int window_shift) {
  if (window_shift < 1 || window_shift > block_size)
    throw Error("window_shift " + std::to_string(window_shift) + " is outside 1.." +
                std::to_string(block_size) + " (the model's block_size): give one in that range");
  GenerationWindow window;
  window.start = previous_start;
  if (context_size - window.start > static_cast<size_t>(block_size)) {
    // Overflow: keep the last block_size + 1 - window_shift tokens, every position moved, so
    // nothing cached still holds (learned positions: each row's embedding changed).
    window.start = context_size - static_cast<size_t>(block_size + 1 - window_shift);
    cached_rows = 0;
  }
  window.T = static_cast<int>(context_size - window.start);
  if (cached_rows >= window.T)
    throw Error("internal: generation's context did not grow past its cached rows");
  window.first_row = cached_rows;  // the cache holds the rows before
  return window;
}

std::vector<std::vector<int32_t>> generate_texts(
    GPT& model, std::vector<int32_t> context, const SamplingOptions& options, uint32_t first_sample,
    int texts, const std::function<void(int text, int32_t id)>& on_token,
    KeyValueCacheContents* cache) {
  const int block_size = model.shape().block_size;
  if (texts < 1) throw Error("internal: generation of no text");
  if (context.empty()) context.push_back(0);
  const uint64_t plans_before = model.plans_made();
  model.plan_texts(texts);  // before anything is cached: a new plan drops the cache ...
  if (cache && model.plans_made() != plans_before) cache->tokens.clear();  // ... and the record
  size_t start = 0;     // where the window begins in the texts (the same for all)
  int cached_rows = 0;  // rows of the window whose keys and values are computed
  if (cache) {
    // The first window's leading tokens that the cache holds at the same positions, all but its
    // last row at most (whose logits the first token is drawn from).
    const GenerationWindow first =
        next_generation_window(context.size(), 0, 0, block_size, options.window_shift);
    start = first.start;
    while (static_cast<size_t>(cached_rows) < cache->tokens.size() && cached_rows + 1 < first.T &&
           cache->tokens[cached_rows] == context[start + cached_rows])
      ++cached_rows;
    // The rows before the last that are not cached yet, then (in the loop) the last row alone, as
    // every row after it is computed: a text's first token then does not depend on whether the
    // rows before were reused (with bf16 products a row computed among others sums in another
    // order, and a near-even draw can turn on the last bit).
    if (cached_rows < first.T - 1) {
      model.forward(context.data() + start, nullptr, 1, first.T - 1, DropoutContext{}, cached_rows,
                    /*last_logits_only=*/true);
      cached_rows = first.T - 1;
    }
  }
  // Every text keeps the same length, so that their windows move together: one that drew
  // stop_token is given that token again and again, and its text ends where it drew it first.
  std::vector<std::vector<int32_t>> contexts(texts, context);
  std::vector<size_t> ends(texts, 0);  // 0: still drawing
  int still_drawing = texts;
  std::vector<int32_t> last_tokens(texts);
  for (int n = 0; n < options.max_new_tokens && still_drawing > 0; ++n) {
    const GenerationWindow window = next_generation_window(contexts[0].size(), start, cached_rows,
                                                           block_size, options.window_shift);
    std::vector<std::vector<float>> logits(texts);
    if (n > 0 && window.first_row == window.T - 1) {
      // Every text's one new row, in one pass.
      for (int i = 0; i < texts; ++i) last_tokens[i] = contexts[i].back();
      model.forward_next_tokens(last_tokens.data(), texts, window.T - 1);
      for (int i = 0; i < texts; ++i) logits[i] = model.logits_row(i, 0);
    } else if (n == 0) {
      // The prompt, the same for every text: computed once, in text 0's place, then copied.
      model.forward(context.data() + window.start, nullptr, 1, window.T, DropoutContext{},
                    window.first_row, /*last_logits_only=*/true);
      logits.assign(texts, model.logits_row(0, window.T - 1));
      for (int i = 1; i < texts; ++i) model.copy_cached_rows(0, i, window.T);
    } else {
      // Past block_size: each text's own window, recomputed in text 0's place and copied to its
      // own (text 0's last, so that its place is its own at the end).
      for (int i = texts - 1; i >= 0; --i) {
        model.forward(contexts[i].data() + window.start, nullptr, 1, window.T, DropoutContext{},
                      window.first_row, /*last_logits_only=*/true);
        logits[i] = model.logits_row(0, window.T - 1);
        if (i > 0) model.copy_cached_rows(0, i, window.T);
      }
    }
    start = window.start;
    cached_rows = window.T;
    for (int i = 0; i < texts; ++i) {
      if (ends[i] != 0) {
        contexts[i].push_back(options.stop_token);
        continue;
      }
      const RandomStream stream = make_stream(options.seed, RandomPurpose::kSampling,
                                              first_sample + static_cast<uint32_t>(i),
                                              static_cast<uint32_t>(n));
      const int32_t next = sample_from_logits(std::move(logits[i]), options, stream.word64(0));
      if (next == options.stop_token) {
        ends[i] = contexts[i].size();
        --still_drawing;
      } else if (on_token) {
        on_token(i, next);
      }
      contexts[i].push_back(next);
    }
  }
  // Text 0's place holds its window (its stop tokens too: what was computed).
  if (cache)
    cache->tokens.assign(contexts[0].begin() + start, contexts[0].begin() + start + cached_rows);
  for (int i = 0; i < texts; ++i)
    if (ends[i] != 0) contexts[i].resize(ends[i]);
  return contexts;
}

std::vector<int32_t> generate(GPT& model, std::vector<int32_t> context,
                              const SamplingOptions& options, uint32_t sample_index,
                              const std::function<void(int32_t)>& on_token,
                              KeyValueCacheContents* cache) {
  const auto each_token = [&](int, int32_t id) {
    if (on_token) on_token(id);
  };
  return generate_texts(model, std::move(context), options, sample_index, 1, each_token, cache)
      .front();
}

}  // namespace folio

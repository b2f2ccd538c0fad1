// Which elements dropout keeps. Every backend calls this same function, so a CPU run, a GPU run,
// one rank or many, draw the same mask for the same (seed, step, layer, site, sample, element).
//
// An element is kept when its random word is >= p * 2^32, i.e. with probability 1 - p, and the
// kept values are scaled by 1 / (1 - p), as torch.nn.Dropout does in training mode.
#pragma once

#include <cstdint>

#include "core/host_device.h"
#include "core/philox.h"

namespace folio {

// Where in the model a dropout sits; packed with the layer into the stream's purpose word.
enum class DropoutSite : uint32_t {
  kAttentionWeights = 1,  // softmax(q k^T) inside each head, before multiplying by v
  kAttentionOutput = 2,   // after sa.proj
  kFeedForwardOutput = 3, // after ffwd.net.2
  kEmbedding = 4,         // on tok_emb + pos_emb, before the first block (layer 0)
};

struct DropoutSpec {
  float p = 0.0f;               // drop probability; 0 turns dropout off (eval, inference)
  uint64_t seed = 0;            // the run's seed
  uint32_t step = 0;            // training step
  uint32_t purpose = 0;         // kDropout, layer and site, from dropout_spec()
  uint32_t first_sample = 0;    // global index of this batch's first window

  FOLIO_HOST_DEVICE bool active() const { return p > 0.0f; }
  FOLIO_HOST_DEVICE uint32_t threshold() const {
    const double t = static_cast<double>(p) * 4294967296.0;
    return t >= 4294967295.0 ? 0xFFFFFFFFu : static_cast<uint32_t>(t);
  }
  FOLIO_HOST_DEVICE float scale() const { return 1.0f / (1.0f - p); }
  // The random stream of one sample (window) of the batch.
  FOLIO_HOST_DEVICE RandomStream stream(uint32_t sample) const {
    return RandomStream{seed, purpose, step, first_sample + sample};
  }
  // Whether element `element` of sample `sample` is kept.
  FOLIO_HOST_DEVICE bool keeps(uint32_t sample, uint64_t element) const {
    return stream(sample).word(element) >= threshold();
  }
};

// Word `lane` (0..3) of a Philox block, by selects rather than an indexed load, so that a GPU
// kernel's block stays in registers.
FOLIO_HOST_DEVICE uint32_t philox_word(const PhiloxBlock& block, unsigned lane) {
  const uint32_t low = (lane & 1u) ? block.word[1] : block.word[0];
  const uint32_t high = (lane & 1u) ? block.word[3] : block.word[2];
  return (lane & 2u) ? high : low;
}

// The dropout multipliers (0, or `scale` where keeps() says kept) of kCount (at most 4)
// consecutive elements of `stream` from `first`, in order: one Philox call where they lie in one
// block of four words (for four, `first` a multiple of 4), else two. For GPU kernels whose threads
// hold runs of consecutive elements (attention_registers.cu); tests/test_philox.cpp checks it
// against keeps().
template <int kCount>
FOLIO_HOST_DEVICE void draw_multipliers(const RandomStream& stream, uint32_t threshold, float scale,
                                        uint64_t first, float (&out)[kCount]) {
  static_assert(kCount >= 1 && kCount <= 4);
  const uint32_t block_index = static_cast<uint32_t>(first >> 2);
  const unsigned offset = static_cast<unsigned>(first & 3);
  const PhiloxBlock low = stream.block(block_index);
  if (offset == 0) {  // the words in place, without selects (the usual case)
    for (int e = 0; e < kCount; ++e) out[e] = low.word[e] >= threshold ? scale : 0.0f;
    return;
  }
  PhiloxBlock high = low;
  if (offset + kCount > 4) high = stream.block(block_index + 1);
  for (int e = 0; e < kCount; ++e) {
    const unsigned w = offset + static_cast<unsigned>(e);
    const uint32_t word = w < 4 ? philox_word(low, w) : philox_word(high, w - 4);
    out[e] = word >= threshold ? scale : 0.0f;
  }
}

FOLIO_HOST_DEVICE DropoutSpec dropout_spec(float p, uint64_t seed, uint32_t step, int layer,
                                           DropoutSite site, uint32_t first_sample) {
  const uint32_t purpose = (static_cast<uint32_t>(RandomPurpose::kDropout) << 24) |
                           (static_cast<uint32_t>(layer) << 8) | static_cast<uint32_t>(site);
  return DropoutSpec{p, seed, step, purpose, first_sample};
}

// No dropout (p = 0): what eval and generation use.
FOLIO_HOST_DEVICE DropoutSpec no_dropout() { return DropoutSpec{}; }

// Whether two specs draw the same masks: what a backward pass checks before it recalls the masks
// its forward pass kept as bits (the CPU's and the GPU's attention), instead of drawing them again.
FOLIO_HOST_DEVICE bool draws_the_same_masks(const DropoutSpec& a, const DropoutSpec& b) {
  return a.p == b.p && a.seed == b.seed && a.step == b.step && a.purpose == b.purpose &&
         a.first_sample == b.first_sample;
}

}  // namespace folio

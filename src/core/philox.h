// Counter-based randomness: Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as
// 1, 2, 3", SC'11). A random number is a pure function of (key, counter), so any backend, any rank
// and any resumed run reproduces it without carrying generator state around.
//
// folio's streams: key = the run's 64-bit seed; counter = {block, item, step, purpose}:
//   purpose  what the numbers are for (RandomPurpose, plus layer/site for dropout)
//   step     the training step (or the eval round / the sample number)
//   item     the global index of the sample in the batch (so that the numbers a window gets do not
//            depend on how the global batch is split over ranks or micro-steps)
//   block    index / 4 within the stream; each Philox call yields 4 words
#pragma once

#include <cstdint>

#include "core/host_device.h"

namespace folio {

struct PhiloxBlock {
  uint32_t word[4];
};

FOLIO_HOST_DEVICE void philox_mulhilo(uint32_t a, uint32_t b, uint32_t& hi, uint32_t& lo) {
  const uint64_t product = static_cast<uint64_t>(a) * b;
  hi = static_cast<uint32_t>(product >> 32);
  lo = static_cast<uint32_t>(product);
}

// Philox4x32 with 10 rounds; checked against the Random123 known-answer vectors in the tests.
FOLIO_HOST_DEVICE PhiloxBlock philox4x32_10(uint32_t c0, uint32_t c1, uint32_t c2, uint32_t c3,
                                            uint32_t k0, uint32_t k1) {
  constexpr uint32_t kMul0 = 0xD2511F53u, kMul1 = 0xCD9E8D57u;
  constexpr uint32_t kWeyl0 = 0x9E3779B9u, kWeyl1 = 0xBB67AE85u;
  for (int round = 0; round < 10; ++round) {
    uint32_t hi0, lo0, hi1, lo1;
    philox_mulhilo(kMul0, c0, hi0, lo0);
    philox_mulhilo(kMul1, c2, hi1, lo1);
    const uint32_t n0 = hi1 ^ c1 ^ k0, n1 = lo1, n2 = hi0 ^ c3 ^ k1, n3 = lo0;
    c0 = n0, c1 = n1, c2 = n2, c3 = n3;
    k0 += kWeyl0;
    k1 += kWeyl1;
  }
  return {{c0, c1, c2, c3}};
}

enum class RandomPurpose : uint32_t {
  kInit = 1,           // parameter initialisation (item = tensor index)
  kTrainBatch = 2,     // window offsets of the training batch
  kEvalTrainBatch = 3, // window offsets of eval batches on the train split
  kEvalValBatch = 4,   // ... on the val split
  kDropout = 5,        // dropout masks (layer and site packed in, see dropout_purpose)
  kSampling = 6,       // multinomial draws while generating text
  kEpochShuffle = 7,   // permutation of windows in sampling=epoch
};

// A stream of random 32-bit words: the counter fields other than the block index.
struct RandomStream {
  uint64_t seed = 0;
  uint32_t purpose = 0;
  uint32_t step = 0;
  uint32_t item = 0;

  FOLIO_HOST_DEVICE PhiloxBlock block(uint32_t block_index) const {
    return philox4x32_10(block_index, item, step, purpose, static_cast<uint32_t>(seed),
                         static_cast<uint32_t>(seed >> 32));
  }
  // The index-th 32-bit word of the stream.
  FOLIO_HOST_DEVICE uint32_t word(uint64_t index) const {
    return block(static_cast<uint32_t>(index >> 2)).word[index & 3];
  }
  // A 64-bit word made of words 2i and 2i+1 (both from one Philox call).
  FOLIO_HOST_DEVICE uint64_t word64(uint64_t index) const {
    const PhiloxBlock b = block(static_cast<uint32_t>(index >> 1));
    const int lane = static_cast<int>(index & 1) * 2;
    return (static_cast<uint64_t>(b.word[lane]) << 32) | b.word[lane + 1];
  }
};

FOLIO_HOST_DEVICE RandomStream make_stream(uint64_t seed, RandomPurpose purpose, uint32_t step,
                                           uint32_t item) {
  return RandomStream{seed, static_cast<uint32_t>(purpose), step, item};
}

// A uniform float in [0, 1) with 24 random bits.
FOLIO_HOST_DEVICE float uniform_from_word(uint32_t word) {
  return static_cast<float>(word >> 8) * (1.0f / 16777216.0f);
}

// A uniform integer in [0, n) by Lemire's multiply-shift (bias below n / 2^64: negligible).
FOLIO_HOST_DEVICE uint64_t uniform_below(uint64_t word, uint64_t n) {
#if defined(__CUDA_ARCH__) || defined(__HIP_DEVICE_COMPILE__)
  return __umul64hi(word, n);
#else
  return static_cast<uint64_t>((static_cast<unsigned __int128>(word) * n) >> 64);
#endif
}

}  // namespace folio

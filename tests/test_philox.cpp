// The counter-based generator: known answers, the vectorised CPU path against the scalar one,
// and the dropout decision's rate.
#include <gtest/gtest.h>

#include "backend/cpu/vector_math.h"
#include "core/dropout_mask.h"
#include "core/philox.h"

namespace folio {
namespace {

TEST(Philox, MatchesRandom123KnownAnswers) {
  struct Case {
    uint32_t counter[4], key[2], expected[4];
  };
  const Case cases[] = {
      {{0, 0, 0, 0}, {0, 0}, {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
      {{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff},
       {0xffffffff, 0xffffffff},
       {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
      {{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344},
       {0xa4093822, 0x299f31d0},
       {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}},
  };
  for (const Case& c : cases) {
    const PhiloxBlock block = philox4x32_10(c.counter[0], c.counter[1], c.counter[2],
                                            c.counter[3], c.key[0], c.key[1]);
    for (int i = 0; i < 4; ++i) EXPECT_EQ(block.word[i], c.expected[i]) << "word " << i;
  }
}

TEST(Philox, VectorisedWordsEqualScalarWords) {
  const RandomStream stream{0x123456789abcdefULL, 77, 5, 3};
  for (uint64_t first : {0ULL, 1ULL, 2ULL, 3ULL, 1021ULL, (1ULL << 33) + 7}) {
    for (size_t count : {size_t(1), size_t(3), size_t(5), size_t(1000), size_t(2049)}) {
      std::vector<uint32_t> words(count);
      cpu::random_words(stream, first, count, words.data());
      for (size_t i = 0; i < count; ++i)
        ASSERT_EQ(words[i], stream.word(first + i)) << "first " << first << " i " << i;
    }
  }
}

TEST(Philox, StreamsDifferInEveryField) {
  const RandomStream base{1, 2, 3, 4};
  EXPECT_NE(base.word(0), (RandomStream{2, 2, 3, 4}.word(0)));
  EXPECT_NE(base.word(0), (RandomStream{1, 3, 3, 4}.word(0)));
  EXPECT_NE(base.word(0), (RandomStream{1, 2, 4, 4}.word(0)));
  EXPECT_NE(base.word(0), (RandomStream{1, 2, 3, 5}.word(0)));
  EXPECT_NE(base.word(0), base.word(1));
}

TEST(Dropout, KeepsAboutOneMinusPAndMultipliersAgreeWithKeeps) {
  const DropoutSpec spec = dropout_spec(0.2f, 1337, 9, 2, DropoutSite::kAttentionWeights, 100);
  const size_t n = 1 << 20;
  std::vector<float> multipliers(n);
  cpu::dropout_multipliers(multipliers.data(), spec, 3, 11, n);
  size_t kept = 0;
  for (size_t i = 0; i < n; ++i) {
    const bool keeps = spec.keeps(3, 11 + i);
    ASSERT_EQ(multipliers[i], keeps ? 1.25f : 0.0f);
    kept += keeps;
  }
  // Binomial(n, 0.8): standard deviation 0.0004 of n; 5 sigma.
  EXPECT_NEAR(static_cast<double>(kept) / n, 0.8, 0.002);
}

// The GPU attention kernels' draws of two or four consecutive multipliers at once: what keeps()
// says of each element, from every offset within a block of four words (straddling two blocks
// from offsets 1-3 for four, 3 for two), and across the 2^32 blocks where the block index wraps.
template <int kCount>
void check_runs_of_multipliers(const DropoutSpec& spec) {
  const RandomStream stream = spec.stream(5);
  const uint64_t starts[] = {0, 1, 2, 3, 4, 5, 6, 7, 1021, (1ULL << 34) - 3, (1ULL << 34) + 2};
  for (uint64_t first : starts) {
    float drawn[kCount];
    draw_multipliers(stream, spec.threshold(), spec.scale(), first, drawn);
    for (int e = 0; e < kCount; ++e)
      EXPECT_EQ(drawn[e], spec.keeps(5, first + e) ? spec.scale() : 0.0f)
          << kCount << " from " << first << ", element " << e;
  }
}

TEST(Dropout, RunsOfMultipliersDrawnAtOnceAgreeWithKeeps) {
  for (float p : {0.2f, 0.5f, 0.9f}) {
    const DropoutSpec spec = dropout_spec(p, 99, 4, 1, DropoutSite::kAttentionWeights, 7);
    check_runs_of_multipliers<1>(spec);
    check_runs_of_multipliers<2>(spec);
    check_runs_of_multipliers<3>(spec);
    check_runs_of_multipliers<4>(spec);
  }
}

TEST(Dropout, OffWhenPIsZero) {
  const DropoutSpec spec = dropout_spec(0.0f, 1, 1, 0, DropoutSite::kFeedForwardOutput, 0);
  EXPECT_FALSE(spec.active());
  EXPECT_FALSE(no_dropout().active());
}

TEST(Random, UniformBelowStaysInRange) {
  const RandomStream stream{42, 1, 0, 0};
  for (uint64_t n : {1ULL, 2ULL, 7ULL, 1003598ULL}) {
    for (int i = 0; i < 1000; ++i) EXPECT_LT(uniform_below(stream.word64(i), n), n);
  }
  EXPECT_EQ(uniform_below(~0ULL, 10), 9u);
  EXPECT_EQ(uniform_below(0, 10), 0u);
}

}  // namespace
}  // namespace folio

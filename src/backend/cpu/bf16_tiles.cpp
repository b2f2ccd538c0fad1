// bf16 products for attention on AMX tiles or with AVX512-BF16 (bf16_tiles.h). Built with
// -march=x86-64-v4 -mavx512bf16, and -mamx-tile -mamx-bf16 where the compiler has them; nothing
// here runs unless engine_runs() says so. A compiler without AVX512-BF16 (or another processor)
// builds the stub at the end, which runs no engine; one without AMX builds no AMX engine.
#include "backend/cpu/bf16_tiles.h"

#if defined(__AVX512BF16__)

#include <cpuid.h>
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace folio::cpu::tiles {

namespace {

bool cpu_has_avx512_bf16() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  return __get_cpuid_count(7, 1, &eax, &ebx, &ecx, &edx) && ((eax >> 5) & 1u);
}

#if defined(__AMX_TILE__) && defined(__AMX_BF16__)
constexpr long kRequestPermission = 0x1023;  // ARCH_REQ_XCOMP_PERM
constexpr long kTileData = 18;               // XFEATURE_XTILEDATA

bool cpu_and_kernel_allow_tiles() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (!__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx)) return false;
  const bool tile = (edx >> 24) & 1u, tile_bf16 = (edx >> 22) & 1u;
  if (!tile || !tile_bf16 || !cpu_has_avx512_bf16()) return false;
  // Linux leaves the 8 KiB of tile registers out of a thread's saved state until the process
  // asks for them; without this the first tile instruction is killed with SIGILL.
  return syscall(SYS_arch_prctl, kRequestPermission, kTileData) == 0;
}

// Every tile 16 rows of 64 bytes: C tiles 16 x 16 fp32, A tiles 16 rows x 32 bf16, B tiles 16
// pair-rows x 16 pairs.
struct alignas(64) TileConfig {
  uint8_t palette = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t bytes_per_row[16] = {64, 64, 64, 64, 64, 64, 64, 64};
  uint8_t rows[16] = {16, 16, 16, 16, 16, 16, 16, 16};
};
#else
bool cpu_and_kernel_allow_tiles() { return false; }  // this compiler has no AMX
#endif

// Round to the nearest bf16, ties to even, NaN kept a NaN (as cpu::to_bf16, vector_math.h).
inline bf16 round_one(float x) {
  uint32_t bits;
  __builtin_memcpy(&bits, &x, sizeof(bits));
  const bool nan = (bits & 0x7FFFFFFFu) > 0x7F800000u;
  bits = nan ? (bits | 0x00400000u) : bits + 0x7FFFu + ((bits >> 16) & 1u);
  return static_cast<bf16>(bits >> 16);
}

// Up to 16 floats from x (count of them, the rest zero).
inline __m512 load_up_to_16(const float* x, int count) {
  if (count >= 16) return _mm512_loadu_ps(x);
  if (count <= 0) return _mm512_setzero_ps();
  return _mm512_maskz_loadu_ps(static_cast<__mmask16>((1u << count) - 1u), x);
}

// The same from bf16 values, widened exactly (a bf16 is the upper half of an fp32): rounding them
// back gives the same bits, so one code path serves both kinds of source.
inline __m512 load_up_to_16(const bf16* x, int count) {
  if (count <= 0) return _mm512_setzero_ps();
  const __m256i halves =
      count >= 16 ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x))
                  : _mm256_maskz_loadu_epi16(static_cast<__mmask16>((1u << count) - 1u), x);
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(halves), 16));
}

// Transposes the 16 x 16 block of 32-bit values in r[0..15] (row i in r[i]) in registers: pairs
// of rows interleaved by 32 bits, then by 64 within each 128-bit lane, then the 128-bit lanes
// gathered across registers twice. Afterwards r[c] holds column c.
inline void transpose_16x16(__m512 r[16]) {
  __m512 t[16], u[16];
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);      // per lane: a0 b0 a1 b1
    t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);  //           a2 b2 a3 b3
  }
  for (int i = 0; i < 16; i += 4) {  // rows i..i+3, columns 4L + j in lane L of u[i + j]
    u[i] = _mm512_shuffle_ps(t[i], t[i + 2], 0x44);
    u[i + 1] = _mm512_shuffle_ps(t[i], t[i + 2], 0xEE);
    u[i + 2] = _mm512_shuffle_ps(t[i + 1], t[i + 3], 0x44);
    u[i + 3] = _mm512_shuffle_ps(t[i + 1], t[i + 3], 0xEE);
  }
  for (int j = 0; j < 4; ++j) {  // column 4L + j: lane L of u[j], u[4 + j], u[8 + j], u[12 + j]
    const __m512 even_low = _mm512_shuffle_f32x4(u[j], u[4 + j], 0x88);
    const __m512 odd_low = _mm512_shuffle_f32x4(u[j], u[4 + j], 0xDD);
    const __m512 even_high = _mm512_shuffle_f32x4(u[8 + j], u[12 + j], 0x88);
    const __m512 odd_high = _mm512_shuffle_f32x4(u[8 + j], u[12 + j], 0xDD);
    r[j] = _mm512_shuffle_f32x4(even_low, even_high, 0x88);
    r[8 + j] = _mm512_shuffle_f32x4(even_low, even_high, 0xDD);
    r[4 + j] = _mm512_shuffle_f32x4(odd_low, odd_high, 0x88);
    r[12 + j] = _mm512_shuffle_f32x4(odd_low, odd_high, 0xDD);
  }
}

inline __m256i round_16(__m512 x) { return reinterpret_cast<__m256i>(_mm512_cvtneps_pbh(x)); }

}  // namespace

bool engine_runs(Engine engine) {
  static const bool tiles = cpu_and_kernel_allow_tiles(), vectors = cpu_has_avx512_bf16();
  switch (engine) {
    case Engine::amx: return tiles;
    case Engine::avx512_bf16: return vectors;
    case Engine::none: break;
  }
  return true;
}

template <typename Source>
void pack_panels(bf16* panels, size_t panel_stride, const Source* source, size_t ld, int K, int N,
                 int K_padded, int N_padded) {
  // Interleaves 16 columns of rows 2r and 2r+1: the conversion puts row 2r's in the low 16
  // lanes and row 2r+1's in the high ones, the permutation takes them alternately.
  const __m512i interleave = _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25,
                                              9, 24, 8, 23, 7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2,
                                              17, 1, 16, 0);
  for (int j = 0; j < N_padded / 16; ++j) {
    const int columns = N - 16 * j;
    bf16* panel = panels + j * panel_stride;
    for (int r = 0; r < K_padded / 2; ++r) {
      const int k = 2 * r;
      const __m512 even = k < K ? load_up_to_16(source + k * ld + 16 * j, columns)
                                : _mm512_setzero_ps();
      const __m512 odd = k + 1 < K ? load_up_to_16(source + (k + 1) * ld + 16 * j, columns)
                                   : _mm512_setzero_ps();
      const __m512i both = reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(odd, even));
      _mm512_storeu_si512(panel + 32 * r, _mm512_permutexvar_epi16(interleave, both));
    }
  }
}

template <typename Source>
void pack_panels_transposed(bf16* panels, size_t panel_stride, const Source* source, size_t ld,
                            int K, int N, int K_padded, int N_padded) {
  // B[k][n] = source[n][k]: a pair (B[2r][c], B[2r+1][c]) is two neighbours in source row c, so
  // 32 floats of a source row, rounded, are 16 pairs: one column of a 16 x 16 block of pairs of
  // the panel. Sixteen such rows (16 columns of B) are rounded and the block transposed.
  for (int j = 0; j < N_padded / 16; ++j) {
    bf16* panel = panels + j * panel_stride;
    for (int k = 0; k < K_padded; k += 32) {
      __m512 pairs[16];
      for (int c = 0; c < 16; ++c) {
        const int n = 16 * j + c;
        const Source* row = source + n * ld + k;
        const __m512 low = n < N ? load_up_to_16(row, K - k) : _mm512_setzero_ps();
        const __m512 high = n < N ? load_up_to_16(row + 16, K - k - 16) : _mm512_setzero_ps();
        pairs[c] = reinterpret_cast<__m512>(_mm512_cvtne2ps_pbh(high, low));
      }
      transpose_16x16(pairs);
      for (int r = 0; r < 16; ++r) _mm512_storeu_ps(panel + 32 * (k / 2 + r), pairs[r]);
    }
  }
}

template <typename Source>
void round_rows(bf16* to, size_t ld_to, const Source* from, size_t ld_from, int rows, int cols,
                int rows_padded) {
  for (int r = 0; r < rows_padded; ++r) {
    bf16* y = to + r * ld_to;
    for (int c = 0; c < cols; c += 16) {
      const __m512 x = r < rows ? load_up_to_16(from + r * ld_from + c, cols - c)
                                : _mm512_setzero_ps();
      const __m256i rounded = reinterpret_cast<__m256i>(_mm512_cvtneps_pbh(x));
      if (cols - c >= 16)
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(y + c), rounded);
      else
        _mm256_mask_storeu_epi16(y + c, static_cast<__mmask16>((1u << (cols - c)) - 1u), rounded);
    }
  }
}

template <typename Source>
void round_transposed(bf16* to, size_t ld_to, const Source* from, size_t ld_from, int rows,
                      int cols, int rows_padded) {
  // 16 x 16 blocks through registers; cols is a multiple of 16 (a head's size).
  for (int r0 = 0; r0 < rows_padded; r0 += 16) {
    for (int c0 = 0; c0 < cols; c0 += 16) {
      __m512 block[16];
      for (int i = 0; i < 16; ++i)
        block[i] =
            r0 + i < rows ? load_up_to_16(from + (r0 + i) * ld_from + c0, 16) : _mm512_setzero_ps();
      transpose_16x16(block);
      const int width = rows_padded - r0 < 16 ? rows_padded - r0 : 16;
      for (int c = 0; c < 16; ++c)
        _mm256_mask_storeu_epi16(to + (c0 + c) * ld_to + r0,
                                 static_cast<__mmask16>((1u << width) - 1u), round_16(block[c]));
    }
  }
}

namespace {
// Whole cache lines of fp32 results bypass the cache: attention's fp32 outputs are read much
// later, if at all (the products read the bf16 copies), and a store that misses would first
// read the line it overwrites. Unaligned rows are stored as usual.
inline void store_16(float* to, __m512 x) {
  if ((reinterpret_cast<uintptr_t>(to) & 63) == 0)
    _mm512_stream_ps(to, x);
  else
    _mm512_storeu_ps(to, x);
}
}  // namespace

void store_rows(float* to, size_t ld_to, bf16* to16, const float* from, size_t ld_from, int rows,
                int cols) {
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; c += 16) {
      const __m512 x = _mm512_loadu_ps(from + r * ld_from + c);
      if (to) store_16(to + r * ld_to + c, x);
      if (to16)
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(to16 + r * ld_to + c), round_16(x));
    }
  _mm_sfence();  // the streamed stores are visible before anything reads them
}

void transpose(float* to, size_t ld_to, bf16* to16, const float* from, size_t ld_from, int rows,
               int cols) {
  for (int c0 = 0; c0 < cols; c0 += 16) {
    const int width = cols - c0 < 16 ? cols - c0 : 16;
    for (int r0 = 0; r0 < rows; r0 += 16) {
      __m512 block[16];
      for (int i = 0; i < 16; ++i) block[i] = _mm512_loadu_ps(from + (r0 + i) * ld_from + c0);
      transpose_16x16(block);
      for (int c = 0; c < width; ++c) {
        if (to) store_16(to + (c0 + c) * ld_to + r0, block[c]);
        if (to16)
          _mm256_storeu_si256(reinterpret_cast<__m256i*>(to16 + (c0 + c) * ld_to + r0),
                              round_16(block[c]));
      }
    }
  }
  _mm_sfence();  // the streamed stores are visible before anything reads them
}

namespace {

#if defined(__AMX_TILE__) && defined(__AMX_BF16__)
void gemm_amx(int M, int N, int K, const bf16* A, size_t lda, const bf16* B, size_t panel_stride,
              float* C, size_t ldc, bool accumulate) {
  // A 32 x 32 block of C at a time in four tiles (0-3), from two A tiles (4, 5: rows m and
  // m + 16) and two B tiles (6, 7: columns n and n + 16), 32 of K a step.
  const size_t a_stride = lda * sizeof(bf16), c_stride = ldc * sizeof(float);
  for (int m = 0; m < M; m += 32) {
    for (int n = 0; n < N; n += 32) {
      float* c = C + m * ldc + n;
      if (accumulate) {
        _tile_loadd(0, c, c_stride);
        _tile_loadd(1, c + 16, c_stride);
        _tile_loadd(2, c + 16 * ldc, c_stride);
        _tile_loadd(3, c + 16 * ldc + 16, c_stride);
      } else {
        _tile_zero(0);
        _tile_zero(1);
        _tile_zero(2);
        _tile_zero(3);
      }
      const bf16* b_left = B + (n / 16) * panel_stride;
      const bf16* b_right = b_left + panel_stride;
      for (int k = 0; k < K; k += 32) {
        _tile_loadd(4, A + m * lda + k, a_stride);
        _tile_loadd(5, A + (m + 16) * lda + k, a_stride);
        _tile_loadd(6, b_left + 16 * k, 64);  // pair row k / 2: 32 bf16 each
        _tile_loadd(7, b_right + 16 * k, 64);
        _tile_dpbf16ps(0, 4, 6);
        _tile_dpbf16ps(1, 4, 7);
        _tile_dpbf16ps(2, 5, 6);
        _tile_dpbf16ps(3, 5, 7);
      }
      _tile_stored(0, c, c_stride);
      _tile_stored(1, c + 16, c_stride);
      _tile_stored(2, c + 16 * ldc, c_stride);
      _tile_stored(3, c + 16 * ldc + 16, c_stride);
    }
  }
}
#endif

// The same product with vdpbf16ps. Lane c of B's pair row r holds (B[2r][c], B[2r+1][c]), so one
// instruction adds A[m][2r] B[2r][c] + A[m][2r+1] B[2r+1][c] to 16 columns of row m, with A's
// pair broadcast to every lane. A block of 8 rows x 32 columns of C (two panels, 16
// accumulators) is summed in registers over all of K: per pair row, 2 loads of B and 8
// broadcasts of A feed 16 instructions, enough independent sums to hide their latency. Two
// panels' columns over K = 256 are 32 KiB of B, which the rows of A pass over from L1 and L2.
void gemm_vector(int M, int N, int K, const bf16* A, size_t lda, const bf16* B,
                 size_t panel_stride, float* C, size_t ldc, bool accumulate) {
  constexpr int kRows = 8;
  for (int n = 0; n < N; n += 32) {
    const bf16* b_left = B + (n / 16) * panel_stride;
    const bf16* b_right = b_left + panel_stride;
    for (int m = 0; m < M; m += kRows) {
      __m512 left[kRows], right[kRows];
#pragma GCC unroll 8
      for (int r = 0; r < kRows; ++r) {
        const float* c = C + (m + r) * ldc + n;
        left[r] = accumulate ? _mm512_loadu_ps(c) : _mm512_setzero_ps();
        right[r] = accumulate ? _mm512_loadu_ps(c + 16) : _mm512_setzero_ps();
      }
      const bf16* a = A + m * lda;
      for (int k = 0; k < K; k += 2) {
        const __m512bh b0 = reinterpret_cast<__m512bh>(_mm512_loadu_si512(b_left + 16 * k));
        const __m512bh b1 = reinterpret_cast<__m512bh>(_mm512_loadu_si512(b_right + 16 * k));
#pragma GCC unroll 8  // the accumulators must stay in registers
        for (int r = 0; r < kRows; ++r) {
          int32_t pair;  // A[m + r][k] and A[m + r][k + 1]
          __builtin_memcpy(&pair, a + r * lda + k, sizeof(pair));
          const __m512bh broadcast = reinterpret_cast<__m512bh>(_mm512_set1_epi32(pair));
          left[r] = _mm512_dpbf16_ps(left[r], broadcast, b0);
          right[r] = _mm512_dpbf16_ps(right[r], broadcast, b1);
        }
      }
#pragma GCC unroll 8
      for (int r = 0; r < kRows; ++r) {
        float* c = C + (m + r) * ldc + n;
        _mm512_storeu_ps(c, left[r]);
        _mm512_storeu_ps(c + 16, right[r]);
      }
    }
  }
}

// Rows of at most 128 numbers (256 bytes) are, in generation, the attention heads' keys and
// values in the key/value cache: each head's slice of a cached row, 4.5 KiB apart at GPT-2 124M's
// width, read one after the other. The hardware's prefetchers did not run ahead of that stride: a
// token's keys and values (12 layers, 950 cached positions, 2 threads, a microbenchmark on an AMD
// Zen 5) took 2.0-2.3 ms at 15-17 GB/s, and 1.0-1.1 ms at 32-37 GB/s with each row asked for
// kRowsAhead rows before it is read. Weight rows, read as one stream, need no such hint.
constexpr int kRowsAhead = 16;
constexpr int kShortRow = 128;
void prefetch(const bf16* row, int numbers) {  // the cache lines of row[0, numbers)
  for (int at = 0; at < numbers; at += 32)
    _mm_prefetch(reinterpret_cast<const char*>(row + at), _MM_HINT_T0);
}

// One row of W (n) against the M rows of A, the row read from its start to its end: 128 numbers
// (four vectors) a step, each into its own accumulator per row of A, so that four vdpbf16ps
// chains overlap. A thread then reads its block of weight rows as one sequential stream, which
// the hardware prefetcher follows. (Eight rows read side by side, 32 numbers of each a step,
// made eight streams 1.5 KiB apart at K = 768, and GPT-2 124M's products of one token ran at
// 24-39 GB/s against 40-48 for this, alternating in one run on a 2-core AMD Zen 5, whose plain
// 2-thread read measured 43-45 GB/s.) K's last partial vectors load zeros past the end (masked)
// into the first accumulator, where they add nothing.
template <int M>
void weight_row(int n, int K, const bf16* A, size_t lda, const bf16* W, size_t ldw, float* C,
                size_t ldc) {
  constexpr int kChains = 4;
  const bf16* w = W + n * ldw;
  __m512 sums[M][kChains];
#pragma GCC unroll 4
  for (int m = 0; m < M; ++m)
#pragma GCC unroll 4
    for (int chain = 0; chain < kChains; ++chain) sums[m][chain] = _mm512_setzero_ps();
  int k = 0;
  for (; k + 32 * kChains <= K; k += 32 * kChains) {
#pragma GCC unroll 4
    for (int chain = 0; chain < kChains; ++chain) {
      const __m512bh weights =
          reinterpret_cast<__m512bh>(_mm512_loadu_si512(w + k + 32 * chain));
#pragma GCC unroll 4
      for (int m = 0; m < M; ++m)
        sums[m][chain] = _mm512_dpbf16_ps(
            sums[m][chain],
            reinterpret_cast<__m512bh>(_mm512_loadu_si512(A + m * lda + k + 32 * chain)),
            weights);
    }
  }
  for (; k < K; k += 32) {
    const __mmask32 in_row = K - k >= 32 ? ~__mmask32{0} : (__mmask32{1} << (K - k)) - 1;
    const __m512bh weights = reinterpret_cast<__m512bh>(_mm512_maskz_loadu_epi16(in_row, w + k));
#pragma GCC unroll 4
    for (int m = 0; m < M; ++m)
      sums[m][0] = _mm512_dpbf16_ps(
          sums[m][0], reinterpret_cast<__m512bh>(_mm512_maskz_loadu_epi16(in_row, A + m * lda + k)),
          weights);
  }
#pragma GCC unroll 4
  for (int m = 0; m < M; ++m)
    C[m * ldc + n] = _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(sums[m][0], sums[m][1]),
                                                        _mm512_add_ps(sums[m][2], sums[m][3])));
}

}  // namespace

void rows_times_transposed(int M, int n_begin, int n_end, int K, const bf16* A, size_t lda,
                           const bf16* W, size_t ldw, float* C, size_t ldc) {
  with_rows(M, [&](auto rows) {
    for (int n = n_begin; n < n_end; ++n) {
      if (K <= kShortRow && n + kRowsAhead < n_end) prefetch(W + (n + kRowsAhead) * ldw, K);
      weight_row<decltype(rows)::count>(n, K, A, lda, W, ldw, C, ldc);
    }
  });
}

namespace {

// Blocks x 32 columns of C from n (the last block `columns` wide, the others 32) for M rows of A:
// per pair of B's rows k, k + 1, unpacklo/unpackhi interleave them into vdpbf16ps's pairs
// (B[k][c], B[k + 1][c]) and one broadcast of (A[m][k], A[m][k + 1]) multiplies 16 columns' pairs.
// The interleave works within 128-bit lanes, so accumulator `low` holds columns 0-3, 8-11, 16-19,
// 24-27 of the block and `high` the other four of each eight; two permutations put them back in
// order at the end. An odd K's last row is paired with zeros.
template <int M, int Blocks>
void value_columns(int n, int columns, int K, const bf16* A, size_t lda, const bf16* B, size_t ldb,
                   float* C, size_t ldc) {
  __mmask32 in_block[Blocks];
#pragma GCC unroll 2
  for (int block = 0; block < Blocks; ++block) {
    const int width = block + 1 < Blocks ? 32 : columns;
    in_block[block] = width >= 32 ? ~__mmask32{0} : (__mmask32{1} << width) - 1;
  }
  __m512 low[M][Blocks], high[M][Blocks];
#pragma GCC unroll 8
  for (int m = 0; m < M; ++m)
#pragma GCC unroll 2
    for (int block = 0; block < Blocks; ++block)
      low[m][block] = high[m][block] = _mm512_setzero_ps();
  for (int k = 0; k < K; k += 2) {
    const bool pair = k + 1 < K;
    if (k + kRowsAhead + 1 < K) {  // a head's values, rows 4.5 KiB apart (kRowsAhead above)
      prefetch(B + (k + kRowsAhead) * ldb + n, 32 * Blocks);
      prefetch(B + (k + kRowsAhead + 1) * ldb + n, 32 * Blocks);
    }
    __m512bh lower[Blocks], upper[Blocks];
#pragma GCC unroll 2
    for (int block = 0; block < Blocks; ++block) {
      const bf16* b = B + k * ldb + n + 32 * block;
      const __m512i first = _mm512_maskz_loadu_epi16(in_block[block], b);
      const __m512i second =
          pair ? _mm512_maskz_loadu_epi16(in_block[block], b + ldb) : _mm512_setzero_si512();
      lower[block] = reinterpret_cast<__m512bh>(_mm512_unpacklo_epi16(first, second));
      upper[block] = reinterpret_cast<__m512bh>(_mm512_unpackhi_epi16(first, second));
    }
#pragma GCC unroll 8
    for (int m = 0; m < M; ++m) {
      const bf16* a = A + m * lda + k;
      const int32_t both = pair ? a[0] | int32_t{a[1]} << 16 : a[0];
      const __m512bh broadcast = reinterpret_cast<__m512bh>(_mm512_set1_epi32(both));
#pragma GCC unroll 2
      for (int block = 0; block < Blocks; ++block) {
        low[m][block] = _mm512_dpbf16_ps(low[m][block], broadcast, lower[block]);
        high[m][block] = _mm512_dpbf16_ps(high[m][block], broadcast, upper[block]);
      }
    }
  }
  const __m512i first_16 =
      _mm512_setr_epi32(0, 1, 2, 3, 16, 17, 18, 19, 4, 5, 6, 7, 20, 21, 22, 23);
  const __m512i last_16 =
      _mm512_setr_epi32(8, 9, 10, 11, 24, 25, 26, 27, 12, 13, 14, 15, 28, 29, 30, 31);
#pragma GCC unroll 8
  for (int m = 0; m < M; ++m)
#pragma GCC unroll 2
    for (int block = 0; block < Blocks; ++block) {
      float* c = C + m * ldc + n + 32 * block;
      const __mmask32 mask = in_block[block];
      _mm512_mask_storeu_ps(c, static_cast<__mmask16>(mask),
                            _mm512_permutex2var_ps(low[m][block], first_16, high[m][block]));
      _mm512_mask_storeu_ps(c + 16, static_cast<__mmask16>(mask >> 16),
                            _mm512_permutex2var_ps(low[m][block], last_16, high[m][block]));
    }
}

template <int M>
void rows_of_a_by_values(int N, int K, const bf16* A, size_t lda, const bf16* B, size_t ldb,
                         float* C, size_t ldc) {
  int n = 0;
  for (; n + 64 <= N; n += 64) value_columns<M, 2>(n, 32, K, A, lda, B, ldb, C, ldc);
  for (; n < N; n += 32) value_columns<M, 1>(n, N - n < 32 ? N - n : 32, K, A, lda, B, ldb, C, ldc);
}

}  // namespace

void rows_times(int M, int N, int K, const bf16* A, size_t lda, const bf16* B, size_t ldb, float* C,
                size_t ldc) {
  with_rows(M, [&](auto rows) {
    rows_of_a_by_values<decltype(rows)::count>(N, K, A, lda, B, ldb, C, ldc);
  });
}

void begin_products(Engine engine) {
#if defined(__AMX_TILE__) && defined(__AMX_BF16__)
  if (engine == Engine::amx) {
    static const TileConfig config;
    _tile_loadconfig(&config);
  }
#endif
  (void)engine;
}

void end_products(Engine engine) {
#if defined(__AMX_TILE__) && defined(__AMX_BF16__)
  if (engine == Engine::amx) _tile_release();
#endif
  (void)engine;
}

void gemm(Engine engine, int M, int N, int K, const bf16* A, size_t lda, const bf16* B,
          size_t panel_stride, float* C, size_t ldc, bool accumulate) {
#if defined(__AMX_TILE__) && defined(__AMX_BF16__)
  if (engine == Engine::amx)
    return gemm_amx(M, N, K, A, lda, B, panel_stride, C, ldc, accumulate);
#endif
  (void)engine;
  gemm_vector(M, N, K, A, lda, B, panel_stride, C, ldc, accumulate);
}

}  // namespace folio::cpu::tiles

#else  // no AVX512-BF16 in this build: attention keeps its fp32 products

#include <cstdlib>

namespace folio::cpu::tiles {
bool engine_runs(Engine engine) { return engine == Engine::none; }
template <typename Source>
void pack_panels(bf16*, size_t, const Source*, size_t, int, int, int, int) {
  std::abort();
}
template <typename Source>
void pack_panels_transposed(bf16*, size_t, const Source*, size_t, int, int, int, int) {
  std::abort();
}
template <typename Source>
void round_rows(bf16*, size_t, const Source*, size_t, int, int, int) {
  std::abort();
}
template <typename Source>
void round_transposed(bf16*, size_t, const Source*, size_t, int, int, int) {
  std::abort();
}
void transpose(float*, size_t, bf16*, const float*, size_t, int, int) { std::abort(); }
void store_rows(float*, size_t, bf16*, const float*, size_t, int, int) { std::abort(); }
void begin_products(Engine) { std::abort(); }
void end_products(Engine) { std::abort(); }
void gemm(Engine, int, int, int, const bf16*, size_t, const bf16*, size_t, float*, size_t, bool) {
  std::abort();
}
void rows_times_transposed(int, int, int, int, const bf16*, size_t, const bf16*, size_t, float*,
                           size_t) {
  std::abort();
}
void rows_times(int, int, int, const bf16*, size_t, const bf16*, size_t, float*, size_t) {
  std::abort();
}
}  // namespace folio::cpu::tiles

#endif

// The copies that take either kind of source, built for both (bf16_tiles.h).
namespace folio::cpu::tiles {
template void pack_panels(bf16*, size_t, const float*, size_t, int, int, int, int);
template void pack_panels(bf16*, size_t, const bf16*, size_t, int, int, int, int);
template void pack_panels_transposed(bf16*, size_t, const float*, size_t, int, int, int, int);
template void pack_panels_transposed(bf16*, size_t, const bf16*, size_t, int, int, int, int);
template void round_rows(bf16*, size_t, const float*, size_t, int, int, int);
template void round_rows(bf16*, size_t, const bf16*, size_t, int, int, int);
template void round_transposed(bf16*, size_t, const float*, size_t, int, int, int);
template void round_transposed(bf16*, size_t, const bf16*, size_t, int, int, int);
}  // namespace folio::cpu::tiles

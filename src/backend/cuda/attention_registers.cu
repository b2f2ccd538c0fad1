// Tensor-core attention with the scores in registers: FlashAttention-2's arrangement of the
// kernels in attention_flash_bf16.cu (attention_kernels.h has the algorithm; the numerics are the
// same: bf16 operands, fp32 scores, statistics and accumulators, row sums before dropout). The
// default both ways (cuda_backend.cu says what each measured on an H200); FOLIO_ATTENTION_FORWARD
// and FOLIO_ATTENTION_BACKWARD=staged run them with their loads staged by cp.async.
//
// Each warp keeps its 16 rows' operands, scores, probabilities and accumulators in registers;
// only the other side's rows (64 at a step) pass through shared memory. The products are PTX
// mma.sync m16n8k16 (bf16 in, fp32 accumulators), whose fragment layout is documented, unlike
// WMMA's. With g = lane / 4 and t = lane % 4:
//   accumulator (16 x 8, fp32): registers 0, 1 hold row g, columns 2t and 2t + 1; 2, 3 row g + 8;
//   A (16 x 16, bf16 pairs): (row g, columns 2t, 2t + 1), (row g + 8, the same),
//                            (row g, columns 2t + 8, 2t + 9), (row g + 8, the same);
//   B (16 x 8, bf16 pairs): (rows 2t, 2t + 1 of column g), (rows 2t + 8, 2t + 9 of column g);
// a pair's lower column (or row) in the lower half. So two adjacent accumulator tiles of scores
// are, as they stand, the A fragment of the next product: P V in the forward pass, (P M)^T dout,
// dS^T q and dS k in the backward.
//
// The keys in each group of 16 are loaded interleaved (KeysByQuads, KeysByPairs below), so that
// the dropout multipliers of a thread's scores come four (two in the dk/dv kernel) from one
// Philox call.
#include <cuda_bf16.h>

#include "backend/cuda/attention_kernels.h"
#include "backend/cuda/attention_tiles.cuh"

namespace folio::cuda {

namespace {

constexpr int kHeadSizeOfRegisterBackward = 64;  // the largest: at 128 its accumulators spill

// ---- the order of the keys in the tiles ---------------------------------------------------------
// The dropout multiplier of score (i, j) is word (h T + i) T + j of the sample's Philox stream,
// and one Philox call gives four consecutive words. A thread's scores lie in columns 2t and
// 2t + 1 of each 8-column tile and in rows g and g + 8: with the keys in order, a thread used two
// words of each call in the forward and dq kernels and one in the dk/dv kernel, and Philox's
// rounds were about half of the forward kernel's instructions (its SASS for sm_90, head size 64).
// So, within each group of 16 keys:
//   KeysByQuads (keys as columns: forward, dq): tile row (score column) 8h + 2t + e holds key
//     4t + 2h + e, so thread t's columns of tiles 2m and 2m + 1 are keys 16m + 4t.. 16m + 4t + 3
//     (in_quad): four words of one call (DropoutCursor::multipliers; two calls when T is not a
//     multiple of 4);
//   KeysByPairs (keys as rows: dk, dv): tile row 8r + g holds key 2g + r, so a thread's rows g
//     and g + 8 are keys 2g and 2g + 1: two words of one call.
// The products sum over keys in whatever order the probabilities' columns and the values' (or
// keys') rows share, and each key's gradients are stored at its own row.
struct KeysByQuads {
  __host__ __device__ static constexpr int tile_row(int key) {
    return (key & ~15) | (((key >> 1) & 1) << 3) | (((key >> 2) & 3) << 1) | (key & 1);
  }
  __host__ __device__ static constexpr int key(int tile_row) {
    return (tile_row & ~15) | (((tile_row >> 1) & 3) << 2) | (((tile_row >> 3) & 1) << 1) |
           (tile_row & 1);
  }
};
struct KeysByPairs {
  __host__ __device__ static constexpr int tile_row(int key) {
    return (key & ~15) | ((key & 1) << 3) | ((key >> 1) & 7);
  }
  __host__ __device__ static constexpr int key(int tile_row) {
    return (tile_row & ~15) | ((tile_row & 7) << 1) | ((tile_row >> 3) & 1);
  }
};

// Each order is a permutation within groups of 16, and key() undoes tile_row().
template <typename Order>
constexpr bool permutes_each_group_of_16() {
  for (int key = 0; key < kStep; ++key) {
    const int row = Order::tile_row(key);
    if (row / 16 != key / 16 || Order::key(row) != key) return false;
  }
  return true;
}
static_assert(permutes_each_group_of_16<KeysByQuads>() && permutes_each_group_of_16<KeysByPairs>());
static_assert(KeysByQuads::key(2) == 4 && KeysByQuads::key(8) == 2 && KeysByPairs::key(8) == 1);

// With keys as columns (KeysByQuads), a thread's scores in tiles 2m and 2m + 1 of its row r (g,
// or g + 8) are keys 16m + 4t + k, k = 0..3, of the chunk: this one.
template <int kTiles>
__device__ __forceinline__ float& in_quad(float (&tiles)[kTiles][4], int m, int r, int k) {
  return tiles[2 * m + k / 2][2 * r + k % 2];
}
// in_quad's tile 2m + k / 2, column 2t + k % 2 of it, is the score column KeysByQuads puts key
// 16m + 4t + k at: the kernels name that key directly.
constexpr bool quads_name_the_keys_by_quads() {
  for (int m = 0; m < kStep / 16; ++m)
    for (int t = 0; t < 4; ++t)
      for (int k = 0; k < 4; ++k)
        if (KeysByQuads::key((2 * m + k / 2) * 8 + 2 * t + k % 2) != 16 * m + 4 * t + k)
          return false;
  return true;
}
static_assert(quads_name_the_keys_by_quads());

// ---- fragments ----------------------------------------------------------------------------------

// d += a b: a 16 x 16 (A fragment), b 16 x 8 (B fragment), d 16 x 8 fp32.
__device__ __forceinline__ void mma_16x8x16(float (&d)[4], const uint32_t (&a)[4],
                                            const uint32_t (&b)[2]) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
      "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// Two bf16 in one register, `low` in the lower half.
__device__ __forceinline__ uint32_t packed_bf16(float low, float high) {
  return uint32_t(__bfloat16_as_ushort(__float2bfloat16(low))) |
         (uint32_t(__bfloat16_as_ushort(__float2bfloat16(high))) << 16);
}
// Two adjacent bf16 of a row in shared memory (4-byte aligned), and two of a column (rows ld
// apart).
__device__ __forceinline__ uint32_t row_pair(const bf16* p) {
  return *reinterpret_cast<const uint32_t*>(p);
}
__device__ __forceinline__ uint32_t column_pair(const bf16* p, int ld) {
  return uint32_t(__bfloat16_as_ushort(p[0])) | (uint32_t(__bfloat16_as_ushort(p[ld])) << 16);
}

// g and t of the layouts above.
__device__ __forceinline__ int lane_group() {
  return (threadIdx.x % kWarpSize) / 4;
}
__device__ __forceinline__ int lane_pair() {
  return threadIdx.x % 4;
}

// Each fragment can be read from shared memory two ways (FOLIO_ATTENTION_FRAGMENTS):
// - words (the default): each thread reads its own pairs, 32 bits at a time where a pair lies in
//   a row, 16 at a time (two loads and a merge) where it lies in a column (v in p v);
// - ldmatrix: `ldmatrix.m8n8` reads four 8 x 8 bf16 matrices for the whole warp at once, each
//   lane giving one matrix row's address and getting its pairs in exactly the fragment layouts
//   above (`.trans`: of the transposed matrix, so column pairs cost one instruction too). One
//   instruction for what took 4 (rows) or 12 (columns), and two B fragments at a time.
// The registers hold the same bits either way, so the kernels' results are the same bits.

// The A fragment of rows row.. row + 15, columns column.. column + 15 of a row-major tile.
__device__ __forceinline__ void load_a(uint32_t (&a)[4], const bf16* tile, int ld, int row,
                                       int column) {
  const bf16* p = tile + (row + lane_group()) * ld + column + 2 * lane_pair();
  a[0] = row_pair(p);
  a[1] = row_pair(p + 8 * ld);
  a[2] = row_pair(p + 8);
  a[3] = row_pair(p + 8 * ld + 8);
}
// The B fragment (k.. k + 15, n.. n + 7) of the transpose of a row-major tile: B[k][n] is
// tile[n][k] (k^T in q k^T: the tile's rows are B's columns).
__device__ __forceinline__ void load_b_transposed(uint32_t (&b)[2], const bf16* tile, int ld, int k,
                                                  int n) {
  const bf16* p = tile + (n + lane_group()) * ld + k + 2 * lane_pair();
  b[0] = row_pair(p);
  b[1] = row_pair(p + 8);
}
// The B fragment (k.. k + 15, n.. n + 7) of a row-major tile: B[k][n] is tile[k][n] (v in p v).
__device__ __forceinline__ void load_b(uint32_t (&b)[2], const bf16* tile, int ld, int k, int n) {
  const bf16* p = tile + (k + 2 * lane_pair()) * ld + n + lane_group();
  b[0] = column_pair(p, ld);
  b[1] = column_pair(p + 8 * ld, ld);
}

// ldmatrix.m8n8.x4 (PTX ISA): lane 8 m + r gives the address of row r of matrix m (16 bytes,
// 16-byte aligned: tile strides and the columns below are multiples of 8 bf16); register m of
// lane L gets that matrix's row L / 4, columns 2 (L % 4) and 2 (L % 4) + 1, the lower in the lower
// half; with .trans, rows 2 (L % 4) and 2 (L % 4) + 1 of its column L / 4. The row each lane
// addresses, as an offset in the tile, for each use (LdmatrixRows), then the instructions.
struct LdmatrixRows {
  // load_a's fragment: matrices (rows 0-7, columns 0-7), (8-15, 0-7), (0-7, 8-15), (8-15, 8-15).
  __host__ __device__ static constexpr int a(int lane, int ld, int row, int column) {
    return (row + lane % 8 + 8 * (lane / 8 % 2)) * ld + column + 8 * (lane / 16);
  }
  // load_b_transposed's fragments of k.. k + 15 and k + 16.. k + 31: tile rows n.. n + 7, columns
  // k + 8 m.. k + 8 m + 7.
  __host__ __device__ static constexpr int b_transposed_pair(int lane, int ld, int k, int n) {
    return (n + lane % 8) * ld + k + 8 * (lane / 8);
  }
  // load_b's fragments of columns n.. n + 7 and n + 8.. n + 15 (.trans): tile rows k.. k + 7 and
  // k + 8.. k + 15 of each.
  __host__ __device__ static constexpr int b_pair(int lane, int ld, int k, int n) {
    return (k + lane % 8 + 8 * (lane / 8 % 2)) * ld + n + 8 * (lane / 16);
  }
};

// What ldmatrix puts in lane `lane`'s register `m` when lane i addresses row `row_of(i)`: the tile
// offsets of the register's lower and upper bf16.
struct Pair {
  int low, high;
  constexpr bool operator==(const Pair&) const = default;
};
template <typename RowOf>
constexpr Pair ldmatrix_pair(RowOf row_of, int lane, int m, bool transposed) {
  if (!transposed)
    return {row_of(8 * m + lane / 4) + 2 * (lane % 4),
            row_of(8 * m + lane / 4) + 2 * (lane % 4) + 1};
  return {row_of(8 * m + 2 * (lane % 4)) + lane / 4, row_of(8 * m + 2 * (lane % 4) + 1) + lane / 4};
}

// The proof that both ways fill the same registers: for every lane, the pairs each register of
// load_a, load_b_transposed and load_b reads (their formulas above, g = lane / 4, t = lane % 4)
// are the ones ldmatrix delivers from LdmatrixRows' addresses, at a few strides and offsets.
constexpr bool ldmatrix_gives_the_word_fragments() {
  for (int ld : {24, 40, 72, 136})
    for (int at : {0, 16, 32})
      for (int lane = 0; lane < kWarpSize; ++lane) {
        const int g = lane / 4, t = lane % 4;
        const auto row_pair_at = [](int p) { return Pair{p, p + 1}; };
        const auto column_pair_at = [ld](int p) { return Pair{p, p + ld}; };
        // A: rows `at`.., columns 8..
        const int pa = (at + g) * ld + 8 + 2 * t;
        const Pair a[4] = {row_pair_at(pa), row_pair_at(pa + 8 * ld), row_pair_at(pa + 8),
                           row_pair_at(pa + 8 * ld + 8)};
        for (int m = 0; m < 4; ++m)
          if (ldmatrix_pair([&](int i) { return LdmatrixRows::a(i, ld, at, 8); }, lane, m, false) !=
              a[m])
            return false;
        // B of the transpose: k from 16 (two fragments: k and k + 16), n = at
        for (int half = 0; half < 2; ++half) {
          const int pb = (at + g) * ld + 16 + 16 * half + 2 * t;
          const Pair b[2] = {row_pair_at(pb), row_pair_at(pb + 8)};
          for (int r = 0; r < 2; ++r)
            if (ldmatrix_pair([&](int i) { return LdmatrixRows::b_transposed_pair(i, ld, 16, at); },
                              lane, 2 * half + r, false) != b[r])
              return false;
        }
        // B of the tile: k = at, columns 8.. (two fragments: n and n + 8)
        for (int half = 0; half < 2; ++half) {
          const int pb = (at + 2 * t) * ld + 8 + 8 * half + g;
          const Pair b[2] = {column_pair_at(pb), column_pair_at(pb + 8 * ld)};
          for (int r = 0; r < 2; ++r)
            if (ldmatrix_pair([&](int i) { return LdmatrixRows::b_pair(i, ld, at, 8); }, lane,
                              2 * half + r, true) != b[r])
              return false;
        }
      }
  return true;
}
static_assert(ldmatrix_gives_the_word_fragments());

__device__ __forceinline__ uint32_t shared_address(const bf16* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const bf16* row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(shared_address(row)));
}
__device__ __forceinline__ void ldmatrix_x4_transposed(uint32_t (&r)[4], const bf16* row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(shared_address(row)));
}

// The fragments, read either way (kLdmatrix). B fragments come two at a time: of the transpose,
// those of k.. k + 15 and k + 16.. k + 31 (the same n); of the tile, those of n.. n + 7 and
// n + 8.. n + 15 (the same k).
template <bool kLdmatrix>
__device__ __forceinline__ void fragment_a(uint32_t (&a)[4], const bf16* tile, int ld, int row,
                                           int column) {
  if constexpr (kLdmatrix)
    ldmatrix_x4(a, tile + LdmatrixRows::a(threadIdx.x % kWarpSize, ld, row, column));
  else
    load_a(a, tile, ld, row, column);
}
template <bool kLdmatrix>
__device__ __forceinline__ void fragments_b_transposed(uint32_t (&b)[2][2], const bf16* tile,
                                                       int ld, int k, int n) {
  if constexpr (kLdmatrix) {
    uint32_t r[4];
    ldmatrix_x4(r, tile + LdmatrixRows::b_transposed_pair(threadIdx.x % kWarpSize, ld, k, n));
    b[0][0] = r[0], b[0][1] = r[1], b[1][0] = r[2], b[1][1] = r[3];
  } else {
    load_b_transposed(b[0], tile, ld, k, n);
    load_b_transposed(b[1], tile, ld, k + 16, n);
  }
}
template <bool kLdmatrix>
__device__ __forceinline__ void fragments_b(uint32_t (&b)[2][2], const bf16* tile, int ld, int k,
                                            int n) {
  if constexpr (kLdmatrix) {
    uint32_t r[4];
    ldmatrix_x4_transposed(r, tile + LdmatrixRows::b_pair(threadIdx.x % kWarpSize, ld, k, n));
    b[0][0] = r[0], b[0][1] = r[1], b[1][0] = r[2], b[1][1] = r[3];
  } else {
    load_b(b[0], tile, ld, k, n);
    load_b(b[1], tile, ld, k, n + 8);
  }
}
// Two adjacent 16 x 8 accumulator tiles (columns c.. c + 7 and c + 8.. c + 15) as one A fragment.
__device__ __forceinline__ void a_of(uint32_t (&a)[4], const float (&left)[4],
                                     const float (&right)[4]) {
  a[0] = packed_bf16(left[0], left[1]);
  a[1] = packed_bf16(left[2], left[3]);
  a[2] = packed_bf16(right[0], right[1]);
  a[3] = packed_bf16(right[2], right[3]);
}

template <int kTiles>
__device__ __forceinline__ void zero(float (&tiles)[kTiles][4]) {
#pragma unroll
  for (int n = 0; n < kTiles; ++n) tiles[n][0] = tiles[n][1] = tiles[n][2] = tiles[n][3] = 0.0f;
}

// accumulators (16 x kHead) += a (16 x kColumns, as kColumns / 8 accumulator tiles) b, b a
// row-major (kColumns x kHead) tile: p v, (p m)^T dout, ds^T q, ds k. Each accumulator adds its
// products in the order of k whichever way the fragments are read.
template <int kHead, int kColumns, bool kLdmatrix>
__device__ __forceinline__ void accumulate_product(float (&accumulators)[kHead / 8][4],
                                                   const float (&a_tiles)[kColumns / 8][4],
                                                   const bf16* b_tile) {
  using S = Strides<kHead>;
  static_assert(kHead % 16 == 0);  // output tiles in pairs
#pragma unroll
  for (int kc = 0; kc < kColumns / 16; ++kc) {
    uint32_t a[4];
    a_of(a, a_tiles[2 * kc], a_tiles[2 * kc + 1]);
#pragma unroll
    for (int n = 0; n < kHead / 8; n += 2) {
      uint32_t b[2][2];
      fragments_b<kLdmatrix>(b, b_tile, S::kHeadRow, kc * 16, n * 8);
      mma_16x8x16(accumulators[n], a, b[0]);
      mma_16x8x16(accumulators[n + 1], a, b[1]);
    }
  }
}

// scores (16 x kColumns) = own (16 x kHead, A fragments) other^T, other a row-major (kColumns x
// kHead) tile: q k^T, k q^T, dout v^T, v dout^T.
template <int kHead, int kColumns, bool kLdmatrix>
__device__ __forceinline__ void product_with_rows(float (&scores)[kColumns / 8][4],
                                                  const uint32_t (&own)[kHead / 16][4],
                                                  const bf16* other) {
  using S = Strides<kHead>;
#pragma unroll
  for (int n = 0; n < kColumns / 8; ++n) {
    scores[n][0] = scores[n][1] = scores[n][2] = scores[n][3] = 0.0f;
#pragma unroll
    for (int kk = 0; kk + 1 < kHead / 16; kk += 2) {
      uint32_t b[2][2];
      fragments_b_transposed<kLdmatrix>(b, other, S::kHeadRow, kk * 16, n * 8);
      mma_16x8x16(scores[n], own[kk], b[0]);
      mma_16x8x16(scores[n], own[kk + 1], b[1]);
    }
    if constexpr (kHead / 16 % 2 == 1) {  // head size 16: one fragment, read by words
      uint32_t b[2];
      load_b_transposed(b, other, S::kHeadRow, kHead - 16, n * 8);
      mma_16x8x16(scores[n], own[kHead / 16 - 1], b);
    }
  }
}

// The warp's 16 rows of a row-major tile (from row0), as the A fragments of its kHead columns.
template <int kHead, bool kLdmatrix>
__device__ __forceinline__ void load_own(uint32_t (&own)[kHead / 16][4], const bf16* tile,
                                         int row0) {
#pragma unroll
  for (int kk = 0; kk < kHead / 16; ++kk)
    fragment_a<kLdmatrix>(own[kk], tile, Strides<kHead>::kHeadRow, row0, kk * 16);
}

// Writes a warp's 16 x kHead results (accumulator tiles; the thread's two rows are rows[0] and
// rows[1], those at or past limit skipped) into columns [0, kHead) of a (rows, ld) fp32 matrix and
// its bf16 copy.
template <int kHead>
__device__ void store_rows(const float (&results)[kHead / 8][4], float* out, bf16* out_bf16,
                           size_t ld, const int (&rows)[2], int limit) {
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int row = rows[r];
    if (row >= limit) continue;
#pragma unroll
    for (int n = 0; n < kHead / 8; ++n)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const size_t offset = size_t(row) * ld + n * 8 + 2 * lane_pair() + e;
        out[offset] = results[n][2 * r + e];
        if (out_bf16) out_bf16[offset] = __float2bfloat16(results[n][2 * r + e]);
      }
  }
}

// ---- dropout masks as bits (AttentionMaskBits, FOLIO_ATTENTION_DROPOUT_MASKS=bits)
// --------------- Key j of a query's row is bit j of the row. In the forward and dq kernels a
// thread's four multipliers are keys first + 4t .. first + 4t + 3 (KeysByQuads, `first` a multiple
// of 16 for the forward's groups, of 4 for dq's): a nibble at bit (first + 4t) % 32 of one word. In
// the dk/dv kernel a thread's two keys are 2g and 2g + 1 of a group of 16 (KeysByPairs): two
// adjacent bits of one word.

// The forward kernel's bits of the 16 keys from `first_key` (a multiple of 16) of one query row:
// lane t of each quad holds keys first_key + 4t.. + 3, so the quad's four nibbles, gathered by
// two shuffles, are the group's 16 bits, which lane 0 of the quad writes. Every lane of the warp
// calls this (the shuffles); rows past T and groups from T on are not written.
__device__ __forceinline__ void keep_mask_group(const AttentionMaskBits& masks, int bh, int T,
                                                int row, int first_key, const float (&keep)[4]) {
  uint32_t bits = 0;
#pragma unroll
  for (int k = 0; k < 4; ++k) bits |= (keep[k] != 0.0f ? 1u : 0u) << (4 * lane_pair() + k);
  bits |= shuffle_xor(bits, 1);
  bits |= shuffle_xor(bits, 2);
  if (lane_pair() == 0 && row < T && first_key < T)  // a group from T on may lie past the row
    reinterpret_cast<uint16_t*>(masks.row(bh, T, row))[first_key / 16] = uint16_t(bits);
}

// The multipliers of four keys from `first_key` (a multiple of 4) of one query row, from the
// forward pass's bits. A row past T, or keys from T on, have no bits: their weights are zero
// whatever the multiplier, which stays 1.
__device__ __forceinline__ void recall_mask_quad(const AttentionMaskBits& masks, int bh, int T,
                                                 int row, int first_key, float scale,
                                                 float (&keep)[4]) {
  if (row >= T || first_key >= T) return;
  const uint32_t nibble = masks.row(bh, T, row)[first_key / 32] >> (first_key % 32);
#pragma unroll
  for (int k = 0; k < 4; ++k) keep[k] = (nibble >> k) & 1u ? scale : 0.0f;
}

// The dk/dv kernel's: keys `key` (even) and key + 1 of query rows i and i + 1 (keep[e][r]: query
// i + e, key + r), as draw_pair_of_pairs draws them.
__device__ __forceinline__ void recall_mask_pair_of_pairs(const AttentionMaskBits& masks, int bh,
                                                          int T, int i, int key, float scale,
                                                          float (&keep)[2][2]) {
#pragma unroll
  for (int e = 0; e < 2; ++e) {
    if (i + e >= T || key >= T) continue;
    const uint32_t pair = masks.row(bh, T, i + e)[key / 32] >> (key % 32);
#pragma unroll
    for (int r = 0; r < 2; ++r) keep[e][r] = (pair >> r) & 1u ? scale : 0.0f;
  }
}

// The nibbles the forward kernel writes are where recall_mask_quad reads them: for every group of
// 16 keys, lane t's key first + 4t + k lands on bit (first + 4t + k) of the row, and a quad read
// from any multiple of 4 stays in one word (so does an even pair).
constexpr bool mask_bits_meet() {
  for (int first = 0; first < 256; first += 16)
    for (int t = 0; t < 4; ++t)
      for (int k = 0; k < 4; ++k) {
        const int key = first + 4 * t + k;
        const int written_bit = (first / 16) * 16 + 4 * t + k;  // uint16 first / 16, bit 4t + k
        const int quad = key & ~3;
        const int read_bit = (quad / 32) * 32 + quad % 32 + k;  // word quad / 32, >> quad % 32
        if (written_bit != key || read_bit != key || quad % 32 + 3 >= 32) return false;
      }
  return true;
}
static_assert(mask_bits_meet());

// ---- forward ------------------------------------------------------------------------------------

template <int kHead>
struct ForwardTiles {
  using S = Strides<kHead>;
  alignas(16) bf16 q[kRows * S::kHeadRow];
  alignas(16) bf16 k[kStep * S::kHeadRow];
  alignas(16) bf16 v[kStep * S::kHeadRow];
};

// Three blocks an SM for heads up to 64 (at most 168 registers a thread): left free, the compiler
// took 238 to overlap the Philox calls of four quads of keys, and two blocks an SM. (Head size
// 128 takes all 255 and spills 128 bytes; 24 before the quads.)
// kStaged: the keys and values come through StagedRows (attention_tiles.cuh), the next step's
// copied while the block computes on this one.
template <int kHead, bool kStaged, bool kLdmatrix>
__global__ void __launch_bounds__(kThreads, kHead <= 64 ? 3 : 1)
    flash_forward_registers_kernel(AttentionForwardArgs args) {
  using S = Strides<kHead>;
  // keys scored at once (of the step's kStep): fewer for wide heads, whose output takes more
  // registers (at 128, 64 keys spilled)
  constexpr int kChunk = kHead >= 128 ? 32 : 64;
  constexpr int kKeyTiles = kChunk / 8;  // 8-key tiles of a chunk's scores
  constexpr int kOutTiles = kHead / 8;   // 8-column tiles of the output
  extern __shared__ __align__(128) unsigned char shared_bytes[];
  ForwardTiles<kHead>& tiles = *reinterpret_cast<ForwardTiles<kHead>*>(shared_bytes);
  const ForwardBlock block = forward_block(args);
  const auto& [s, A, ld, head, first_row, last_row, warp, lane, row0, spec] = block;
  const int g = lane_group(), t = lane_pair();
  const int rows[2] = {first_row + row0 + g, first_row + row0 + g + 8};  // this thread's two
  const float *keys = head.q + A, *values = head.q + 2 * A;
  StagedRows<kHead>& stage = staged_rows_of<ForwardTiles<kHead>, kHead>(shared_bytes);
  if constexpr (kStaged) stage_step(stage, keys, ld, values, ld, 0, s.T);  // while q loads

  load_rows<kHead, kRows>(tiles.q, S::kHeadRow, head.q, ld, first_row, s.T);
  __syncthreads();
  uint32_t q[kHead / 16][4];
  load_own<kHead, kLdmatrix>(q, tiles.q, row0);

  const float scale_log2 = head.scale * kLog2e;  // the scores in base 2's units
  // dropout: element (h T + i) T + j of sample b's stream, as every backend draws it
  const DropoutCursor draws(spec, static_cast<uint32_t>(head.b));
  const uint64_t row_elements[2] = {(uint64_t(head.h) * s.T + rows[0]) * s.T,
                                    (uint64_t(head.h) * s.T + rows[1]) * s.T};
  float out[kOutTiles][4];
  zero(out);
  float row_max[2] = {-INFINITY, -INFINITY};  // in base 2's units
  float row_sum[2] = {0.0f, 0.0f};  // this thread's share of its rows' sums (columns 2t, 2t + 1)

  for (int step = 0; step <= last_row; step += kStep) {
    if constexpr (kStaged) {
      take_staged_step<kHead, KeysByQuads>(tiles.k, tiles.v, stage);
      __syncthreads();
      if (step + kStep <= last_row) stage_step(stage, keys, ld, values, ld, step + kStep, s.T);
      if (first_row + row0 + kTile - 1 < step) continue;  // the warp's rows precede the keys
    } else if (!load_key_step<kHead, KeysByQuads>(tiles.k, tiles.v, block, step)) {
      continue;
    }
#pragma unroll 1
    for (int j0 = step; j0 < step + kStep; j0 += kChunk) {
      const bf16* k_rows = tiles.k + (j0 - step) * S::kHeadRow;
      const bf16* v_rows = tiles.v + (j0 - step) * S::kHeadRow;
      float score[kKeyTiles][4];
      product_with_rows<kHead, kChunk, kLdmatrix>(score, q, k_rows);
      // online softmax: scaled, causal (a key after the row is -inf), the rows' new maxima
      float step_max[2] = {-INFINITY, -INFINITY};
#pragma unroll
      for (int m = 0; m < kKeyTiles / 2; ++m)
#pragma unroll
        for (int r = 0; r < 2; ++r)
#pragma unroll
          for (int k = 0; k < 4; ++k) {
            float& value = in_quad(score, m, r, k);
            value = j0 + 16 * m + 4 * t + k <= rows[r] ? value * scale_log2 : -INFINITY;
            step_max[r] = fmaxf(step_max[r], value);
          }
      float subtract[2], correction[2];
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const float new_max = fmaxf(row_max[r], group_max<4>(step_max[r]));
        subtract[r] = new_max == -INFINITY ? 0.0f : new_max;  // a row that saw no key yet
        correction[r] = exp2_approx(row_max[r] - subtract[r]);
        row_max[r] = new_max;
        row_sum[r] *= correction[r];
      }
      // probabilities (unnormalised), summed before dropout, then dropped out, four keys' at a
      // time
#pragma unroll
      for (int m = 0; m < kKeyTiles / 2; ++m)
#pragma unroll
        for (int r = 0; r < 2; ++r) {
          float keep[4] = {1.0f, 1.0f, 1.0f, 1.0f};
          if (spec.active()) draws.multipliers<4>(row_elements[r] + j0 + 16 * m + 4 * t, keep);
          if (args.masks.words != nullptr)  // for the backward kernels, which then draw nothing
            keep_mask_group(args.masks, head.bh, s.T, rows[r], j0 + 16 * m, keep);
#pragma unroll
          for (int k = 0; k < 4; ++k) {
            float& p = in_quad(score, m, r, k);
            p = exp2_approx(p - subtract[r]);
            row_sum[r] += p;
            p *= keep[k];
          }
        }
#pragma unroll
      for (int dt = 0; dt < kOutTiles; ++dt) {
        out[dt][0] *= correction[0];
        out[dt][1] *= correction[0];
        out[dt][2] *= correction[1];
        out[dt][3] *= correction[1];
      }
      accumulate_product<kHead, kChunk, kLdmatrix>(out, score, v_rows);  // out += p v
    }
  }

  // out / sum, its saved copy and bf16 copy, and each row's log-sum-exp
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const float total = group_sum<4>(row_sum[r]);
    const int i = rows[r];
    if (i >= s.T) continue;
    const size_t row_offset = (size_t(head.b) * s.T + i) * A + head.h * kHead + 2 * t;
#pragma unroll
    for (int dt = 0; dt < kOutTiles; ++dt)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const size_t offset = row_offset + dt * 8 + e;
        const float o = out[dt][2 * r + e] / total;
        args.out[offset] = o;
        args.out_copy[offset] = o;
        if (args.out_bf16) args.out_bf16[offset] = __float2bfloat16(o);
      }
    if (t == 0) args.lse[size_t(head.bh) * s.T + i] = row_max[r] * kLn2 + logf(total);
  }
}

// ---- backward -----------------------------------------------------------------------------------
// p = exp(s scale - lse), m the dropout multiplier, dp = dout . v, D = dout . out:
//   dv += (p m)^T dout,   ds = p (dp m - D) scale,   dk += ds^T q,   dq += ds k.
// As in attention_flash_bf16.cu, two kernels: one per block of keys (dk, dv; the scores
// transposed, keys as rows) and one per block of queries (dq), each recomputing p.

template <int kHead>
struct BackwardTiles {
  using S = Strides<kHead>;
  alignas(16) bf16 a[kStep * S::kHeadRow];  // the step's queries (dk/dv) or keys (dq)
  alignas(16) bf16 b[kStep * S::kHeadRow];  // their output gradients, or values
  float lse[kStep], row_dot[kStep];         // of the step's queries (dk/dv); lse times log2(e)
  static_assert(kRows == kStep);            // a and b hold the block's own rows first
};

// What a backward block works on: head (b, h), its own kRows rows (keys or queries) from first,
// the warp's 16 of them from row0.
struct BackwardBlock {
  AttentionShape s;
  int A, ld;
  HeadBlock head;
  int first, row0;
  DropoutSpec spec;
};

__device__ inline BackwardBlock backward_block(const AttentionBackwardArgs& args) {
  BackwardBlock block;
  block.s = args.shape;
  block.A = block.s.width();
  block.ld = 3 * block.A;
  block.head = head_block(block.s, args.qkv, args.dout);
  block.first = blockIdx.x * kRows;
  block.row0 = (threadIdx.x / kWarpSize) * kTile;
  block.spec = args.dropout.resolve();
  return block;
}

// The dropout multipliers of a dk/dv thread's four scores in one 8-query tile: its queries i and
// i + 1 (element row `first_row_element` = (h T + i) T, the next T on) with its keys j and j + 1
// (KeysByPairs: j = 2g of the warp's 16). The lanes g and g ^ 1 (lane ^ 4) hold keys 4a.. 4a + 3
// of the same two queries, so each draws the four words of one query, g's parity saying which,
// keeps its two and hands its partner the other two: one Philox call a lane for four scores, where
// each lane drawing its own two pairs took two. (When T is not a multiple of 4 a row's four
// words may straddle two calls; multipliers takes both.)
__device__ __forceinline__ void draw_pair_of_pairs(float (&keep)[2][2], const DropoutCursor& draws,
                                                   uint64_t first_row_element, int T, int j) {
  const bool odd = (lane_group() & 1) != 0;  // draws query i + 1's words, else query i's
  float four[4];                             // keys 4a.. 4a + 3, 4a = j & ~3
  draws.multipliers<4>(first_row_element + (odd ? T : 0) + (j & ~3), four);
  const float own[2] = {odd ? four[2] : four[0], odd ? four[3] : four[1]};
  const float given[2] = {odd ? four[0] : four[2], odd ? four[1] : four[3]};
  const float from_partner[2] = {shuffle_xor(given[0], 4), shuffle_xor(given[1], 4)};
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    keep[0][r] = odd ? from_partner[r] : own[r];  // query i
    keep[1][r] = odd ? own[r] : from_partner[r];  // query i + 1
  }
}

// The staged copies of query step i0 for the dk/dv kernel: its queries, output gradients,
// log-sum-exps and row dots, as one group (past T: zeros, which the kernel replaces).
template <int kHead>
__device__ void stage_query_step(StagedRows<kHead>& stage, const BackwardBlock& block,
                                 const AttentionBackwardArgs& args, int i0) {
  const AttentionShape& s = block.s;
  if (threadIdx.x < kStep) {
    const int i = i0 + threadIdx.x;
    const bool copy = i < s.T;
    const size_t at = size_t(block.head.bh) * s.T + (copy ? i : 0);
    copy_async_4(&stage.lse[threadIdx.x], args.lse + at, copy);
    copy_async_4(&stage.row_dot[threadIdx.x], args.row_dot + at, copy);
  }
  stage_step(stage, block.head.q, block.ld, block.head.dout, block.A, i0, s.T);
}

// dk and dv for the block's 64 keys, over the query steps that see them. The scores are kept
// transposed (s^T = k q^T: the warp's 16 keys as rows, the step's queries as columns), so that
// (p m)^T and ds^T are A fragments as they stand. kStaged as in the forward.
template <int kHead, bool kStaged, bool kLdmatrix, bool kMaskBits>
__global__ void __launch_bounds__(kThreads)
    flash_backward_keys_registers_kernel(AttentionBackwardArgs args) {
  using S = Strides<kHead>;
  constexpr int kChunk = 32;  // queries scored at once (of the step's kStep), for registers
  constexpr int kOutTiles = kHead / 8;
  extern __shared__ __align__(128) unsigned char shared_bytes[];
  BackwardTiles<kHead>& tiles = *reinterpret_cast<BackwardTiles<kHead>*>(shared_bytes);
  const BackwardBlock block = backward_block(args);
  const auto& [s, A, ld, head, first_key, row0, spec] = block;
  const int g = lane_group(), t = lane_pair();
  // this thread's two keys, adjacent: rows g and g + 8 of the warp's tile (KeysByPairs)
  const int keys[2] = {first_key + KeysByPairs::key(row0 + g),
                       first_key + KeysByPairs::key(row0 + g + 8)};
  const DropoutCursor draws(spec, static_cast<uint32_t>(head.b));
  const float dropout_scale = spec.scale();
  const uint64_t head_rows = uint64_t(head.h) * s.T;  // element (h T + i) T + j
  const float scale_log2 = head.scale * kLog2e;
  StagedRows<kHead>& stage = staged_rows_of<BackwardTiles<kHead>, kHead>(shared_bytes);
  if constexpr (kStaged) stage_query_step(stage, block, args, first_key);  // while k, v load

  // the warp's keys and values, as A fragments
  load_rows<kHead, kRows, KeysByPairs>(tiles.a, S::kHeadRow, head.q + A, ld, first_key, s.T);
  load_rows<kHead, kRows, KeysByPairs>(tiles.b, S::kHeadRow, head.q + 2 * A, ld, first_key, s.T);
  __syncthreads();
  uint32_t k[kHead / 16][4], v[kHead / 16][4];
  load_own<kHead, kLdmatrix>(k, tiles.a, row0);
  load_own<kHead, kLdmatrix>(v, tiles.b, row0);
  float dk[kOutTiles][4], dv[kOutTiles][4];
  zero(dk);
  zero(dv);

  for (int i0 = first_key; i0 < s.T; i0 += kStep) {  // queries before first_key see no key here
    if constexpr (kStaged) {
      take_staged_step<kHead, InOrder>(tiles.a, tiles.b, stage);
      if (threadIdx.x < kStep) {  // past T, p = 0
        const int c = threadIdx.x, i = i0 + c;
        tiles.lse[c] = i < s.T ? stage.lse[c] * kLog2e : INFINITY;
        tiles.row_dot[c] = i < s.T ? stage.row_dot[c] : 0.0f;
      }
      __syncthreads();
      if (i0 + kStep < s.T) stage_query_step(stage, block, args, i0 + kStep);
    } else {
      __syncthreads();  // every warp is done with the last step (and with its own rows)
      load_rows<kHead, kStep>(tiles.a, S::kHeadRow, head.q, ld, i0, s.T);
      load_rows<kHead, kStep>(tiles.b, S::kHeadRow, head.dout, A, i0, s.T);
      for (int c = threadIdx.x; c < kStep; c += blockDim.x) {  // past T, p = 0
        const int i = i0 + c;
        tiles.lse[c] = i < s.T ? args.lse[size_t(head.bh) * s.T + i] * kLog2e : INFINITY;
        tiles.row_dot[c] = i < s.T ? args.row_dot[size_t(head.bh) * s.T + i] : 0.0f;
      }
      __syncthreads();
    }
#pragma unroll 1
    for (int chunk = 0; chunk < kStep; chunk += kChunk) {
      const bf16* q_rows = tiles.a + chunk * S::kHeadRow;
      const bf16* dout_rows = tiles.b + chunk * S::kHeadRow;
      float p[kChunk / 8][4], ds[kChunk / 8][4];
      product_with_rows<kHead, kChunk, kLdmatrix>(p, k, q_rows);      // s^T = k q^T
      product_with_rows<kHead, kChunk, kLdmatrix>(ds, v, dout_rows);  // dp^T = v dout^T
#pragma unroll
      for (int nt = 0; nt < kChunk / 8; ++nt) {
        const int first_column = chunk + nt * 8 + 2 * t;  // the thread's two: this and the next
        float keep[2][2] = {{1.0f, 1.0f}, {1.0f, 1.0f}};  // [column][key]
        if constexpr (kMaskBits)
          recall_mask_pair_of_pairs(args.masks, head.bh, s.T, i0 + first_column, keys[0],
                                    dropout_scale, keep);
        else if (spec.active())
          draw_pair_of_pairs(keep, draws, (head_rows + i0 + first_column) * s.T, s.T, keys[0]);
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int column = first_column + e, i = i0 + column;
#pragma unroll
          for (int r = 0; r < 2; ++r) {
            const int c = 2 * r + e;
            const bool visible = keys[r] <= i && i < s.T;
            const float probability =
                visible ? exp2_approx(p[nt][c] * scale_log2 - tiles.lse[column]) : 0.0f;
            p[nt][c] = probability * keep[e][r];
            ds[nt][c] = probability * (ds[nt][c] * keep[e][r] - tiles.row_dot[column]) * head.scale;
          }
        }
      }
      accumulate_product<kHead, kChunk, kLdmatrix>(dv, p, dout_rows);  // dv += (p m)^T dout
      accumulate_product<kHead, kChunk, kLdmatrix>(dk, ds, q_rows);    // dk += ds^T q
    }
  }
  const size_t head_offset = size_t(head.b) * s.T * ld + head.h * kHead;
  float* dqkv = args.dqkv + head_offset;
  bf16* dqkv_bf16 = args.dqkv_bf16 ? args.dqkv_bf16 + head_offset : nullptr;
  store_rows<kHead>(dk, dqkv + A, dqkv_bf16 ? dqkv_bf16 + A : nullptr, ld, keys, s.T);
  store_rows<kHead>(dv, dqkv + 2 * A, dqkv_bf16 ? dqkv_bf16 + 2 * A : nullptr, ld, keys, s.T);
}

// dq for the block's 64 queries, over the key steps they see. kStaged as in the forward: its
// copies hold no registers, and the kernel fits three blocks an SM (168 registers, no spills at
// head size 64, where the direct loads take 232); without, the compiler's choice (0: no minimum).
template <int kHead, bool kStaged, bool kLdmatrix, bool kMaskBits>
__global__ void __launch_bounds__(kThreads, kStaged ? 3 : 0)
    flash_backward_queries_registers_kernel(AttentionBackwardArgs args) {
  using S = Strides<kHead>;
  constexpr int kChunk = kHead >= 64 ? 32 : 64;  // keys scored at once, for registers
  constexpr int kOutTiles = kHead / 8;
  extern __shared__ __align__(128) unsigned char shared_bytes[];
  BackwardTiles<kHead>& tiles = *reinterpret_cast<BackwardTiles<kHead>*>(shared_bytes);
  const BackwardBlock block = backward_block(args);
  const auto& [s, A, ld, head, first_row, row0, spec] = block;
  const int last_row = min(s.T - 1, first_row + kRows - 1);
  const int g = lane_group(), t = lane_pair();
  const int rows[2] = {first_row + row0 + g, first_row + row0 + g + 8};  // this thread's two
  const float scale_log2 = head.scale * kLog2e;
  float lse[2], row_dot[2];  // lse times log2(e)
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    lse[r] = rows[r] < s.T ? args.lse[size_t(head.bh) * s.T + rows[r]] * kLog2e : INFINITY;
    row_dot[r] = rows[r] < s.T ? args.row_dot[size_t(head.bh) * s.T + rows[r]] : 0.0f;
  }
  const DropoutCursor draws(spec, static_cast<uint32_t>(head.b));
  const float dropout_scale = spec.scale();
  const uint64_t row_elements[2] = {(uint64_t(head.h) * s.T + rows[0]) * s.T,
                                    (uint64_t(head.h) * s.T + rows[1]) * s.T};
  const float *keys = head.q + A, *values = head.q + 2 * A;
  StagedRows<kHead>& stage = staged_rows_of<BackwardTiles<kHead>, kHead>(shared_bytes);
  if constexpr (kStaged) stage_step(stage, keys, ld, values, ld, 0, s.T);  // while q, dout load

  // the warp's queries and output gradients, as A fragments
  load_rows<kHead, kRows>(tiles.a, S::kHeadRow, head.q, ld, first_row, s.T);
  load_rows<kHead, kRows>(tiles.b, S::kHeadRow, head.dout, A, first_row, s.T);
  __syncthreads();
  uint32_t q[kHead / 16][4], dout[kHead / 16][4];
  load_own<kHead, kLdmatrix>(q, tiles.a, row0);
  load_own<kHead, kLdmatrix>(dout, tiles.b, row0);
  float dq[kOutTiles][4];
  zero(dq);

  for (int j0 = 0; j0 <= last_row; j0 += kStep) {
    if constexpr (kStaged) {
      take_staged_step<kHead, KeysByQuads>(tiles.a, tiles.b, stage);
      __syncthreads();
      if (j0 + kStep <= last_row) stage_step(stage, keys, ld, values, ld, j0 + kStep, s.T);
    } else {
      __syncthreads();  // every warp is done with the last step (and with its own rows)
      load_rows<kHead, kStep, KeysByQuads>(tiles.a, S::kHeadRow, keys, ld, j0, s.T);
      load_rows<kHead, kStep, KeysByQuads>(tiles.b, S::kHeadRow, values, ld, j0, s.T);
      __syncthreads();
    }
    if (first_row + row0 + kTile - 1 < j0) continue;  // all this warp's rows precede the keys
#pragma unroll 1
    for (int chunk = 0; chunk < kStep; chunk += kChunk) {
      const bf16* k_rows = tiles.a + chunk * S::kHeadRow;
      const bf16* v_rows = tiles.b + chunk * S::kHeadRow;
      float ds[kChunk / 8][4], dp[kChunk / 8][4];
      product_with_rows<kHead, kChunk, kLdmatrix>(ds, q, k_rows);     // s = q k^T
      product_with_rows<kHead, kChunk, kLdmatrix>(dp, dout, v_rows);  // dp = dout v^T
#pragma unroll
      for (int m = 0; m < kChunk / 16; ++m)
#pragma unroll
        for (int r = 0; r < 2; ++r) {
          const int first_key = j0 + chunk + 16 * m + 4 * t;  // of the four (KeysByQuads)
          float keep[4] = {1.0f, 1.0f, 1.0f, 1.0f};
          if constexpr (kMaskBits)
            recall_mask_quad(args.masks, head.bh, s.T, rows[r], first_key, dropout_scale, keep);
          else if (spec.active())
            draws.multipliers<4>(row_elements[r] + first_key, keep);
#pragma unroll
          for (int k = 0; k < 4; ++k) {
            float& score = in_quad(ds, m, r, k);  // its gradient, in place
            const bool visible = first_key + k <= rows[r] && rows[r] < s.T;
            const float probability = visible ? exp2_approx(score * scale_log2 - lse[r]) : 0.0f;
            score = probability * (in_quad(dp, m, r, k) * keep[k] - row_dot[r]) * head.scale;
          }
        }
      accumulate_product<kHead, kChunk, kLdmatrix>(dq, ds, k_rows);  // dq += ds k
    }
  }
  const size_t head_offset = size_t(head.b) * s.T * ld + head.h * kHead;
  store_rows<kHead>(dq, args.dqkv + head_offset,
                    args.dqkv_bf16 ? args.dqkv_bf16 + head_offset : nullptr, ld, rows, s.T);
}

// Calls launch(staged, ldmatrix) with the options as compile-time constants; staged only where
// the head size allows it.
template <int kHead, typename Launch>
void with_register_options(const RegisterKernelOptions& options, Launch&& launch) {
  const auto with_fragments = [&](auto staged) {
    if (options.ldmatrix)
      launch(staged, std::true_type{});
    else
      launch(staged, std::false_type{});
  };
  if constexpr (kHead <= kLargestStagedHead) {
    if (options.staged) return with_fragments(std::true_type{});
  }
  with_fragments(std::false_type{});
}

// The kernels' names in errors, indexed by staged + 2 ldmatrix.
constexpr const char* kForwardNames[4] = {
    "flash_forward_registers", "flash_forward_registers (staged)",
    "flash_forward_registers (ldmatrix)", "flash_forward_registers (staged, ldmatrix)"};
constexpr const char* kKeysNames[4] = {
    "flash_backward_keys_registers", "flash_backward_keys_registers (staged)",
    "flash_backward_keys_registers (ldmatrix)", "flash_backward_keys_registers (staged, ldmatrix)"};
constexpr const char* kQueriesNames[4] = {"flash_backward_queries_registers",
                                          "flash_backward_queries_registers (staged)",
                                          "flash_backward_queries_registers (ldmatrix)",
                                          "flash_backward_queries_registers (staged, ldmatrix)"};
constexpr int name_index(bool staged, bool ldmatrix) {
  return (staged ? 1 : 0) + (ldmatrix ? 2 : 0);
}

}  // namespace

void flash_attention_forward_registers(const AttentionForwardArgs& args, cudaStream_t stream,
                                       const RegisterKernelOptions& options) {
  with_head_size(args.shape.head_size, [&](auto head) {
    constexpr int kHead = decltype(head)::value;
    const dim3 grid = grid_for(args.shape.T - args.q_start, args.shape);
    with_register_options<kHead>(options, [&](auto staged, auto ldmatrix) {
      constexpr bool kStaged = decltype(staged)::value, kLdmatrix = decltype(ldmatrix)::value;
      launch_with_shared(flash_forward_registers_kernel<kHead, kStaged, kLdmatrix>, grid,
                         shared_bytes_of<ForwardTiles<kHead>, kHead, kStaged>(), stream, args,
                         kForwardNames[name_index(kStaged, kLdmatrix)]);
    });
  });
}

bool register_attention_backward_supports(int head_size) {
  return tensor_core_attention_supports(head_size) && head_size <= kHeadSizeOfRegisterBackward;
}

bool staged_attention_supports(int head_size) {
  return tensor_core_attention_supports(head_size) && head_size <= kLargestStagedHead;
}

void flash_attention_backward_registers(const AttentionBackwardArgs& args, cudaStream_t stream,
                                        const RegisterKernelOptions& options) {
  if (!register_attention_backward_supports(args.shape.head_size))
    throw Error("internal: no register attention backward for head size " +
                std::to_string(args.shape.head_size));
  with_head_size(args.shape.head_size, [&](auto head) {
    constexpr int kHead = decltype(head)::value;
    if constexpr (kHead <= kHeadSizeOfRegisterBackward) {
      static_assert(kHeadSizeOfRegisterBackward <= kLargestStagedHead);
      const dim3 grid = grid_for(args.shape.T, args.shape);
      with_register_options<kHead>(options, [&](auto staged, auto ldmatrix) {
        constexpr bool kStaged = decltype(staged)::value, kLdmatrix = decltype(ldmatrix)::value;
        constexpr size_t bytes = shared_bytes_of<BackwardTiles<kHead>, kHead, kStaged>();
        // The masks' source at compile time: kernels that may read bits hold more registers
        // (with both paths in one kernel, the default query kernel spilled 12 bytes).
        const auto launch = [&](auto mask_bits) {
          constexpr bool kMaskBits = decltype(mask_bits)::value;
          launch_with_shared(
              flash_backward_keys_registers_kernel<kHead, kStaged, kLdmatrix, kMaskBits>, grid,
              bytes, stream, args, kKeysNames[name_index(kStaged, kLdmatrix)]);
          launch_with_shared(
              flash_backward_queries_registers_kernel<kHead, kStaged, kLdmatrix, kMaskBits>, grid,
              bytes, stream, args, kQueriesNames[name_index(kStaged, kLdmatrix)]);
        };
        if (args.masks.words != nullptr)
          launch(std::true_type{});
        else
          launch(std::false_type{});
      });
    }
  });
}

}  // namespace folio::cuda

// bf16 matrix products for the CPU backend's attention with --dtype bf16 (attention.cpp), and the
// few-row products of generation (rows_times_transposed and rows_times, at the end).
// Attention's products are small (a strip of 32 query rows against one head's keys: 32 x 256 x 64
// in shakespeare_char), several per strip and thousands per step; oneDNN 2.6's matmul primitive
// costs microseconds a call in its own bookkeeping and wants each operand dense, which made
// attention slower than fp32 sgemm (docs/performance_cpu.md, "bf16 attention products on AMX
// tiles"), and it has no small-product kernel interface (its brgemm "ukernel" API came in 3.x).
// These functions run the products themselves, on one of two engines that read the same operand
// layouts:
//   - Intel AMX: tile instructions (Sapphire Rapids and later), a tile configuration per thread;
//   - AVX512-BF16: vdpbf16ps on vector registers, 16 columns of pair products per instruction
//     (AMD Zen 4 and Zen 5, Intel Cooper Lake), for CPUs with native bf16 but no tiles.
// Both sum products of bf16 pairs in fp32, so they differ only in the order of the sums.
//
// Compiled once, for x86-64-v4 with AVX512-BF16 (and AMX where the compiler has it:
// CMakeLists.txt), and called only with an engine that engine_runs() allows on this CPU. The
// file includes nothing but intrinsics, so that no inline library function compiled with these
// instructions can stand in for another file's copy.
#pragma once

#include <cstddef>
#include <cstdint>

namespace folio::cpu::tiles {

using bf16 = uint16_t;

// What runs the products. none: neither runs here, and attention keeps its fp32 products.
enum class Engine { none, amx, avx512_bf16 };
const char* engine_name(Engine engine);  // "AMX tiles", "AVX512-BF16" (folio bench names it)

// Whether this CPU and build can run `engine`: for AMX the CPU has AMX-TILE and AMX-BF16 and
// Linux lets this process use the tile data registers (asked for once, with arch_prctl, as oneDNN
// does for its own AMX kernels); for AVX512-BF16 the CPU has it. `none` always runs.
bool engine_runs(Engine engine);
// The engine attention uses (cpu_isa.cpp): the best that runs, AMX before AVX512-BF16, unless
// FOLIO_ATTENTION_TILES=avx512_bf16|none picks a lesser one (so that a machine with AMX can run
// what a Zen 4 runs); an Error names a value that is not an engine or does not run here.
Engine chosen_engine();

// The B operand of gemm, a K x N matrix, in the tiles' "VNNI" layout: for each block of 16
// columns a panel of K/2 rows, row r holding the 16 pairs (B[2r][c], B[2r+1][c]), 64 bytes, one
// tile row. Panel j starts at panels + j * panel_stride (bf16 elements; >= 16 * K_padded).
//
// Their sources are fp32 (rounded to bf16, nearest, ties to even) or bf16 already (copied: a
// tensor the CPU backend keeps as bf16); each is built for Source = float and Source = bf16.
//
// pack_panels writes B[k][n] = source[k * ld + n] for k < K, n < N, as bf16, and zeros up to
// K_padded x N_padded (K_padded a multiple of 32, N_padded of 16).
// pack_panels_transposed writes B[k][n] = source[n * ld + k] (the transpose of source).
template <typename Source>
void pack_panels(bf16* panels, size_t panel_stride, const Source* source, size_t ld, int K, int N,
                 int K_padded, int N_padded);
template <typename Source>
void pack_panels_transposed(bf16* panels, size_t panel_stride, const Source* source, size_t ld,
                            int K, int N, int K_padded, int N_padded);

// to[r * ld_to + c] = bf16 of from[r * ld_from + c], r < rows, c < cols; zeros in rows
// [rows, rows_padded) (the A operand of gemm, row-major).
template <typename Source>
void round_rows(bf16* to, size_t ld_to, const Source* from, size_t ld_from, int rows, int cols,
                int rows_padded);
// to[c * ld_to + r] = bf16 of from[r * ld_from + c]: the transpose, rounded; zeros in columns
// [rows, rows_padded) of `to`. cols is a multiple of 16.
template <typename Source>
void round_transposed(bf16* to, size_t ld_to, const Source* from, size_t ld_from, int rows,
                      int cols, int rows_padded);
// to[c * ld_to + r] = from[r * ld_from + c] for r < rows, c < cols, and the same rounded into
// to16 (laid out as `to`) unless it is null; `to` null: to16 alone. rows is a multiple of 16, and
// `from` is readable up to the next multiple of 16 columns.
void transpose(float* to, size_t ld_to, bf16* to16, const float* from, size_t ld_from, int rows,
               int cols);
// to[r * ld_to + c] = from[r * ld_from + c] for r < rows, c < cols (a multiple of 16), and the
// same rounded into to16 (laid out as `to`) unless it is null; `to` null: to16 alone.
void store_rows(float* to, size_t ld_to, bf16* to16, const float* from, size_t ld_from, int rows,
                int cols);
// Both write `to` with streaming stores where its rows are 64-byte aligned: attention's fp32
// results bypass the cache (the products after it read the bf16 copies).

// Around a thread's products: with AMX the tile registers' shapes are loaded on the calling
// thread before its first gemm (a thread's configuration is its own, and oneDNN's AMX kernels
// load theirs), and released after the last: a thread holding tile data makes the kernel save
// 8 KiB more at each context switch. AVX512-BF16 needs neither.
void begin_products(Engine engine);
void end_products(Engine engine);

// C = A B, or C += A B when `accumulate`: A is M x K bf16, row-major with leading dimension lda
// (elements); B is K x N in panels (above); C is M x N fp32 with leading dimension ldc. M and N
// are multiples of 32, K of 32. Products are summed in fp32.
void gemm(Engine engine, int M, int N, int K, const bf16* A, size_t lda, const bf16* B,
          size_t panel_stride, float* C, size_t ldc, bool accumulate);

// Products of a few rows against a weight matrix as it is stored, for generation's one new row a
// step (gemm.h's gemm_bf16 takes this path for M <= kMostVectorRows): C[m][n] = sum over k of
// A[m][k] W[n][k], for m < M and n_begin <= n < n_end; A is M x K and W is N x K, both bf16,
// row-major (leading dimensions lda, ldw); C is fp32 (ldc). Each row of W is read once, straight
// from memory, for all M rows of A: a matrix-vector product is a pass over the weights, which
// oneDNN's kernels first copy into their own layout. Each weight row is read from start to end
// (one sequential stream a thread), vdpbf16ps on 32 elements at a time, the products summed in
// fp32 lane by lane in four chains, the chains and their 16 lanes added at the end. Only where
// engine_runs(Engine::avx512_bf16); the caller splits [0, N) among its threads.
constexpr int kMostVectorRows = 4;
// The few-row kernels are templates on their row count: calls few(Rows<M>{}) for the M at run
// time, 1 <= M <= kMostVectorRows. Each instantiation takes its caller's own lambda, so no two
// files built for different instruction sets share one.
template <int M>
struct Rows {
  static constexpr int count = M;
};
template <typename Few>
void with_rows(int M, Few&& few) {
  switch (M) {
    case 1:
      return few(Rows<1>{});
    case 2:
      return few(Rows<2>{});
    case 3:
      return few(Rows<3>{});
    case 4:
      return few(Rows<4>{});
    default:
      __builtin_trap();  // the caller keeps M <= kMostVectorRows
  }
}
void rows_times_transposed(int M, int n_begin, int n_end, int K, const bf16* A, size_t lda,
                           const bf16* W, size_t ldw, float* C, size_t ldc);
// rows_times_transposed for a CPU without native bf16 but with AVX2 and FMA (AMD Zen 3), in
// bf16_rows_avx2.cpp: the same products, each bf16 operand widened to fp32 as it is loaded and
// multiplied-added in fp32 (a product of two bf16 is exact in fp32, so only the order of the sums
// differs). Only where the chosen CPU kernels (cpu_isa.h) are AVX2's or better.
void rows_times_transposed_avx2(int M, int n_begin, int n_end, int K, const bf16* A, size_t lda,
                                const bf16* W, size_t ldw, float* C, size_t ldc);
// The other product of generation's attention, its new rows' weights times the cached values:
// C[m][n] = sum over k of A[m][k] B[k][n] for m < M <= kMostVectorRows and n < N, with A M x K
// and B K x N, both bf16 and row-major as stored (lda, ldb), C fp32 (ldc). B's rows are read in
// place, two at a time, and paired in registers; no panels are packed. Only where
// engine_runs(Engine::avx512_bf16).
void rows_times(int M, int N, int K, const bf16* A, size_t lda, const bf16* B, size_t ldb, float* C,
                size_t ldc);

}  // namespace folio::cpu::tiles

// Token and position embeddings on the GPU (reference: backend/reference/embedding.h). Nothing is
// saved: the backward pass reads the tokens the model keeps.
//
// The token-embedding gradient is a scatter: row tokens[p] of dwte gets dout[p] for every
// position p. Adding with atomics would make the sums' order, and so their bits, vary from run
// to run; instead the positions are sorted by token (a stable radix sort, so equal tokens stay in
// position order), each fixed segment of the sorted list sums its pieces of runs of equal
// tokens, and the segment holding a run's start adds the run's pieces in order. None of it needs
// the vocabulary size, which the op is not told.
#include <cub/device/device_radix_sort.cuh>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/kernel_helpers.cuh"

namespace folio {

namespace {

constexpr int kSegment = 64;  // sorted positions per block of the scatter
constexpr int kChannelThreads = 128;

__global__ void embedding_forward_kernel(float* out, const int32_t* tokens, const float* wte,
                                         const float* wpe, int B, int T, int C,
                                         int first_position) {
  const size_t total = size_t(B) * T * C;
  for (size_t e = blockIdx.x * size_t(blockDim.x) + threadIdx.x; e < total;
       e += size_t(gridDim.x) * blockDim.x) {
    const int c = static_cast<int>(e % C);
    const size_t position = e / C;
    const int t = static_cast<int>(position % T);
    out[e] = wte[size_t(tokens[position]) * C + c] + wpe[size_t(first_position + t) * C + c];
  }
}

// dwpe[t, c] += sum over b of dout[b, t, c], b in order.
__global__ void position_gradient_kernel(float* dwpe, const float* dout, int B, int T, int C) {
  const size_t total = size_t(T) * C;
  for (size_t e = blockIdx.x * size_t(blockDim.x) + threadIdx.x; e < total;
       e += size_t(gridDim.x) * blockDim.x) {
    float sum = 0.0f;
    for (int b = 0; b < B; ++b) sum += dout[size_t(b) * total + e];
    dwpe[e] += sum;
  }
}

__global__ void iota_kernel(int32_t* values, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) values[i] = i;
}

// Segment s of the sorted list: for each piece of a run of equal tokens inside it, the sum of
// the piece's dout rows, stored at the piece's first sorted index. The segment's sorted tokens
// and positions go to shared memory first, and each thread loads kInFlight rows' values before it
// adds any, in the same order: on an H200 the loop that loaded a position, then its value, then
// added it took 92 us of shakespeare_char's step for 16,384 rows (two memory latencies a row, a
// few warps an SM), where the bytes need a few.
constexpr int kInFlight = 8;
static_assert(kSegment % kInFlight == 0 && kSegment <= kChannelThreads);
__global__ void token_piece_sums_kernel(float* piece_sums, const float* dout,
                                        const int32_t* sorted_tokens,
                                        const int32_t* sorted_positions, int n, int C) {
  __shared__ int32_t tokens[kSegment + 1], positions[kSegment];  // tokens[count]: the next one
  const int first = blockIdx.x * kSegment, count = min(n - first, kSegment);
  if (threadIdx.x < count) {
    tokens[threadIdx.x] = sorted_tokens[first + threadIdx.x];
    positions[threadIdx.x] = sorted_positions[first + threadIdx.x];
  }
  if (threadIdx.x == 0) tokens[count] = -1;  // no token: the segment's last piece ends there
  __syncthreads();
  for (int c = threadIdx.x; c < C; c += blockDim.x) {
    float sum = 0.0f;
    int piece_start = 0;
    for (int k0 = 0; k0 < count; k0 += kInFlight) {
      float values[kInFlight];
#pragma unroll
      for (int u = 0; u < kInFlight; ++u)
        values[u] = k0 + u < count ? dout[size_t(positions[k0 + u]) * C + c] : 0.0f;
#pragma unroll
      for (int u = 0; u < kInFlight; ++u) {
        const int k = k0 + u;
        if (k >= count) break;
        sum += values[u];
        if (tokens[k + 1] != tokens[k]) {
          piece_sums[size_t(first + piece_start) * C + c] = sum;
          sum = 0.0f;
          piece_start = k + 1;
        }
      }
    }
  }
}

// For each run that starts in segment s: dwte[token] += its pieces, in order (the first piece at
// the run's start, then one at every later segment start the run still covers).
__global__ void token_run_totals_kernel(float* dwte, const float* piece_sums,
                                        const int32_t* sorted_tokens, int n, int C) {
  const int first = blockIdx.x * kSegment, last = min(n, first + kSegment);
  for (int k = first; k < last; ++k) {
    const int32_t token = sorted_tokens[k];
    if (k > 0 && sorted_tokens[k - 1] == token) continue;  // not a run's start
    for (int c = threadIdx.x; c < C; c += blockDim.x) {
      float total = piece_sums[size_t(k) * C + c];
      for (int next = first + kSegment; next < n && sorted_tokens[next] == token; next += kSegment)
        total += piece_sums[size_t(next) * C + c];
      dwte[size_t(token) * C + c] += total;
    }
  }
}

}  // namespace

void CudaBackend::embedding_forward(float* out, const int32_t* tokens, const float* wte,
                                    const float* wpe, int B, int T, int C, int first_position) {
  const size_t total = size_t(B) * T * C;
  if (total == 0) return;
  wrote(out, total * sizeof(float));
  const unsigned blocks = std::min(cuda::blocks_for(total, cuda::kBlockThreads), 16u * sm_count_);
  embedding_forward_kernel<<<blocks, cuda::kBlockThreads, 0, stream_>>>(out, tokens, wte, wpe, B, T,
                                                                        C, first_position);
  check_launch("embedding_forward");
}

void CudaBackend::embedding_backward(float* dwte, float* dwpe, const float* dout,
                                     const int32_t* tokens, int B, int T, int C) {
  const int n = B * T;
  if (n == 0) return;
  wrote(dwpe, size_t(T) * C * sizeof(float));
  const unsigned position_blocks =
      std::min(cuda::blocks_for(size_t(T) * C, cuda::kBlockThreads), 16u * sm_count_);
  position_gradient_kernel<<<position_blocks, cuda::kBlockThreads, 0, stream_>>>(dwpe, dout, B, T,
                                                                                 C);
  check_launch("position_gradient");

  // Sort (token, position) pairs by token; stable, so each token's positions stay in order.
  size_t sort_bytes = 0;
  check_cuda(cub::DeviceRadixSort::SortPairs(
                 nullptr, sort_bytes, tokens, static_cast<int32_t*>(nullptr),
                 static_cast<const int32_t*>(nullptr), static_cast<int32_t*>(nullptr), n),
             "cub::DeviceRadixSort (size)");
  const size_t list_bytes = (size_t(n) * sizeof(int32_t) + 255) / 256 * 256;
  char* memory = static_cast<char*>(scratch(Scratch::kEmbeddingSort, 3 * list_bytes + sort_bytes));
  auto* positions = reinterpret_cast<int32_t*>(memory);
  auto* sorted_tokens = reinterpret_cast<int32_t*>(memory + list_bytes);
  auto* sorted_positions = reinterpret_cast<int32_t*>(memory + 2 * list_bytes);
  iota_kernel<<<cuda::blocks_for(n, cuda::kBlockThreads), cuda::kBlockThreads, 0, stream_>>>(
      positions, n);
  check_launch("iota");
  check_cuda(cub::DeviceRadixSort::SortPairs(memory + 3 * list_bytes, sort_bytes, tokens,
                                             sorted_tokens, positions, sorted_positions, n, 0,
                                             int(sizeof(int32_t) * 8), stream_),
             "cub::DeviceRadixSort");

  // dwte's rows change without wrote(): which rows the host does not know, and gradients have no
  // bf16 copies to invalidate.
  auto* piece_sums =
      static_cast<float*>(scratch(Scratch::kPartialSums, size_t(n) * C * sizeof(float)));
  const unsigned segments = cuda::blocks_for(n, kSegment);
  token_piece_sums_kernel<<<segments, kChannelThreads, 0, stream_>>>(
      piece_sums, dout, sorted_tokens, sorted_positions, n, C);
  check_launch("token_piece_sums");
  token_run_totals_kernel<<<segments, kChannelThreads, 0, stream_>>>(dwte, piece_sums,
                                                                     sorted_tokens, n, C);
  check_launch("token_run_totals");
}

}  // namespace folio

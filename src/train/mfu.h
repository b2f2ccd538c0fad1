// Model FLOPs utilisation (MFU): the FLOPs per second the model needs at the measured speed, over
// the peak the device reaches. Shown on the progress line and written to metrics.jsonl.
//
// The peak: a GPU backend reports its datasheet figure for the dtype it trains in. A CPU has no
// trustworthy datasheet figure (the clock under an AVX-512 load is not the nominal one), so its
// peak is measured: the best FLOP/s of square sgemm products through the backend's own
// matmul_forward, i.e. what the BLAS reaches on this machine with these threads (oneDNN: about
// 480 GFLOP/s on the 2-core build machine, docs/performance_cpu.md "Choosing the BLAS"). MFU on the
// CPU is then "how much of the achievable sgemm speed the whole training step keeps".
#pragma once

#include <cstddef>

#include "backend/backend.h"
#include "model/model_shape.h"

namespace folio {

// Training FLOPs per token (design.md section 4): 6 N for the matrix products of forward and
// backward over N parameters, plus 12 L T A for attention's two T x T products (L layers, T the
// block size, A the heads' concatenated width, which is n_embd unless head_size says otherwise).
double training_flops_per_token(const ModelShape& shape, size_t parameter_count);

// tokens_per_second * flops_per_token / peak, or NaN when the peak is unknown (not positive).
double model_flops_utilization(double tokens_per_second, double flops_per_token,
                               double peak_flops_per_second);

// The FLOP/s of `size`^3 products through backend.matmul_forward: one untimed product, then
// products until `min_seconds` have passed, the fastest one counted. 1024 takes about 0.3 s on a
// 2-core CPU and reaches the BLAS's large-product speed; a GPU wants 4096 or more.
double measure_matmul_flops(Backend& backend, int size = 1024, double min_seconds = 0.25);

}  // namespace folio

// Linear layers on the CPU: three products (reference: backend/reference/matmul.h), by sgemm in
// fp32, or with --dtype bf16 on operands rounded to bf16 and summed in fp32 (gemm_bf16).
#include <omp.h>

#include <algorithm>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/gemm.h"
#include "backend/cpu/vector_math.h"

namespace folio {

namespace {

// Whether the n floats at x share memory with the `count` at `source` (none when it is null).
bool overlaps(const float* source, size_t count, const float* x, size_t n) {
  return source != nullptr && x < source + count && source < x + n;
}

void round_to_bf16(cpu::bf16* out, const float* x, size_t n) {
#pragma omp parallel for simd schedule(static)
  for (size_t i = 0; i < n; ++i) out[i] = cpu::to_bf16(x[i]);
}

// Products of up to this many multiply-adds (all of `tiny`'s and seed004's, none of `baby`'s)
// split poorly over threads inside one sgemm: on a 2-core Zen 3 `tiny`'s nine products a step
// ran 1.5x faster on 2 threads than on 1. Below it the threads split the work themselves, each
// calling sgemm on its own share: a forward product's rows, or the backward pass's two
// gradients, which cost the same (backward 0.245 -> 0.203 ms a step, forward 0.137 -> 0.115).
constexpr size_t kSmallProduct = size_t(8) << 20;

bool small_product(int N, int IC, int OC) {
  return size_t(N) * IC * OC <= kSmallProduct;
}

}  // namespace

void CpuBackend::matmul_forward(float* out, const float* inp, const float* weight,
                                const float* bias, int N, int IC, int OC) {
  if (bf16_) return linear_bf16(out, inp, weight, bias, N, IC, OC, /*relu=*/false);
  if (threads_ > 1 && small_product(N, IC, OC)) {
    // A thread's share is rows of the output, or, for a product of a few rows (generation's
    // one new row: every fp32 product of a GPT-2 token but the head), a stretch of its columns,
    // 16 at a time (whole cache lines of the output): shares of rows would leave all but one
    // thread idle there, and a token of GPT-2 124M took twice as long as on both threads.
    const bool by_columns = N < 8 * threads_;
#pragma omp parallel num_threads(threads_)
    {
      const int parts = omp_get_num_threads(), part = omp_get_thread_num();
      const int length = by_columns ? OC : N;
      const int unit = by_columns ? 16 : 1;
      const int share = ((length + parts - 1) / parts + unit - 1) / unit * unit;
      const int first = std::min(length, share * part);
      const int count = std::min(length, first + share) - first;
      const int rows = by_columns ? N : count, columns = by_columns ? count : OC;
      const size_t first_row = by_columns ? 0 : first, first_column = by_columns ? first : 0;
      float* my_out = out + first_row * OC + first_column;
      if (bias)
        for (int i = 0; i < rows; ++i)
          std::copy_n(bias + first_column, columns, my_out + static_cast<size_t>(i) * OC);
      cpu::sgemm_serial(false, true, rows, columns, IC, 1.0f, inp + first_row * IC, IC,
                          weight + first_column * IC, IC, bias ? 1.0f : 0.0f, my_out, OC);
    }
    return;
  }
  if (bias) {
    // Start from the bias in every row and let the product accumulate onto it (beta = 1).
#pragma omp parallel for schedule(static)
    for (int i = 0; i < N; ++i) std::copy_n(bias, OC, out + static_cast<size_t>(i) * OC);
  }
  cpu::sgemm(false, true, N, OC, IC, 1.0f, inp, IC, weight, IC, bias ? 1.0f : 0.0f, out, OC);
}

// oneDNN adds the bias (and applies ReLU) as it writes the rows, in fp32, or rounded to bf16 for
// an output kept so.
void CpuBackend::linear_bf16(float* out, const float* inp, const float* weight, const float* bias,
                             int N, int IC, int OC, bool relu) {
  const size_t n = static_cast<size_t>(N) * OC;
  const cpu::bf16* inp16 = rounded_to_bf16(kOperandA, inp, static_cast<size_t>(N) * IC);
  const cpu::bf16* weight16 = bf16_weight(weight, static_cast<size_t>(OC) * IC);
  if (cpu::bf16* out16 = kept_in_bf16(out, n)) {
    wrote(out, n * sizeof(cpu::bf16));
    cpu::gemm_bf16_rounded(false, true, N, OC, IC, inp16, IC, weight16, IC, out16, OC, bias, relu);
    return;
  }
  wrote(out, n * sizeof(float));
  cpu::gemm_bf16(false, true, N, OC, IC, inp16, IC, weight16, IC, false, out, OC, bias, relu);
}

void CpuBackend::store_as_bf16(const float* tensor, size_t count) {
  if (!bf16_) throw Error("internal: only a backend with bf16 products keeps tensors as bf16");
  kept_in_bf16_.push_back(RoundedCopy{tensor, count});
}

cpu::bf16* CpuBackend::kept_in_bf16(const float* x, size_t n) const {
  // Addresses as integers: ordering pointers into different allocations is unspecified in C++.
  const uintptr_t at = reinterpret_cast<uintptr_t>(x);
  for (const RoundedCopy& kept : kept_in_bf16_) {
    const uintptr_t begin = reinterpret_cast<uintptr_t>(kept.source);
    const uintptr_t end = begin + kept.count * sizeof(cpu::bf16);
    if (begin <= at && at < end) {
      if (at + n * sizeof(cpu::bf16) > end)
        throw Error("internal: an op reaches past the end of a tensor kept as bf16");
      return reinterpret_cast<cpu::bf16*>(at);
    }
  }
  return nullptr;
}

void CpuBackend::matmul_backward(float* dinp, float* dweight, float* dbias, const float* dout,
                                 const float* inp, const float* weight, int N, int IC, int OC,
                                 GradientUpdate update) {
  const bool add = update == GradientUpdate::kAdd;
  if (bf16_) {
    const cpu::bf16* dout16 = rounded_to_bf16(kGradient, dout, static_cast<size_t>(N) * OC);
    if (dinp) {
      wrote(dinp, static_cast<size_t>(N) * IC * sizeof(float));
      const cpu::bf16* weight16 = bf16_weight(weight, static_cast<size_t>(OC) * IC);
      cpu::gemm_bf16(false, false, N, IC, OC, dout16, OC, weight16, IC, false, dinp, IC);
    }
    const cpu::bf16* inp16 = rounded_to_bf16(kOperandA, inp, static_cast<size_t>(N) * IC);
    cpu::gemm_bf16(true, false, OC, IC, N, dout16, OC, inp16, IC, add, dweight, IC);
    // dbias = the column sums of the bf16 gradient the two products read, as the product
    // ones(1, N) dout16: it reads the 2-byte copy, where summing the fp32 dout read 4 bytes an
    // element (a pass over dout costs as much as a product at shakespeare_char's shapes). The
    // sum is of the rounded gradient, as the bias's is in PyTorch's bf16 autocast.
    if (dbias) cpu::gemm_bf16(false, false, 1, OC, N, ones_bf16(N), N, dout16, OC, add, dbias, OC);
    return;
  }
  if (dinp && threads_ > 1 && small_product(N, IC, OC)) {
    // One thread each for the two gradients; the bias's column sums go with the weight's.
#pragma omp parallel sections num_threads(2)
    {
#pragma omp section
      cpu::sgemm_serial(false, false, N, IC, OC, 1.0f, dout, OC, weight, IC, 0.0f, dinp, IC);
#pragma omp section
      {
        cpu::sgemm_serial(true, false, OC, IC, N, 1.0f, dout, OC, inp, IC, add ? 1.0f : 0.0f,
                          dweight, IC);
        if (dbias) {
          if (!add) std::fill(dbias, dbias + OC, 0.0f);
          for (int i = 0; i < N; ++i) {
            const float* row = dout + static_cast<size_t>(i) * OC;
#pragma omp simd
            for (int o = 0; o < OC; ++o) dbias[o] += row[o];
          }
        }
      }
    }
    return;
  }
  if (dinp) cpu::sgemm(false, false, N, IC, OC, 1.0f, dout, OC, weight, IC, 0.0f, dinp, IC);
  cpu::sgemm(true, false, OC, IC, N, 1.0f, dout, OC, inp, IC, add ? 1.0f : 0.0f, dweight, IC);
  if (dbias) {
    float* partials = thread_partials(static_cast<size_t>(OC));
#pragma omp parallel num_threads(threads_)
    {
      float* mine = partials + static_cast<size_t>(OC) * omp_get_thread_num();
#pragma omp for schedule(static)
      for (int i = 0; i < N; ++i) {
        const float* row = dout + static_cast<size_t>(i) * OC;
#pragma omp simd
        for (int o = 0; o < OC; ++o) mine[o] += row[o];
      }
    }
    if (!add) std::fill(dbias, dbias + OC, 0.0f);
    reduce_thread_partials(dbias, static_cast<size_t>(OC));
  }
}

const cpu::bf16* CpuBackend::ones_bf16(size_t n) {
  if (ones_.size() < n) ones_.assign(n, cpu::to_bf16(1.0f));
  return ones_.data();
}

const cpu::bf16* CpuBackend::rounded_to_bf16(Bf16Operand slot, const float* x, size_t n) {
  if (const cpu::bf16* kept = kept_in_bf16(x, n)) return kept;  // the values are bf16 already
  cpu::HugePageBuffer<cpu::bf16>& buffer = bf16_operands_[slot];
  RoundedCopy& made = made_by_writer_[slot];
  const bool ready = made.source == x && made.count == n;
  made = RoundedCopy{};  // a copy serves one product: the tensor may change after it
  if (ready) return buffer.data();
  for (const RoundedCopy& unwritten : left_unwritten_)
    if (overlaps(unwritten.source, unwritten.count, x, n))
      throw Error("internal: a product read an output written only as the bf16 copy for the "
                  "product before it (ReadBy::kNextProduct)");
  round_to_bf16(buffer.reserve(n), x, n);
  return buffer.data();
}

// Rounding an activation just before its product reads all of it again (4 bytes an element) to
// write 2; the op that computes the activation has each value in a register and writes the copy
// for 2 bytes alone. Products read about 23 (B*T, C) tensors' worth of operands per layer in a
// training step, and all but the three inputs the weight gradients read again are made this way.
cpu::bf16* CpuBackend::bf16_output(Bf16Operand slot, const float* out, size_t n) {
  if (!bf16_) return nullptr;
  for (RoundedCopy& unwritten : left_unwritten_)  // the op writes all of out in fp32
    if (overlaps(unwritten.source, unwritten.count, out, n)) unwritten = RoundedCopy{};
  made_by_writer_[slot] = RoundedCopy{out, n};
  return bf16_operands_[slot].reserve(n);
}

cpu::bf16* CpuBackend::bf16_output(Bf16Operand slot, float*& out, size_t n, ReadBy read_by) {
  if (cpu::bf16* kept = kept_in_bf16(out, n)) {  // only products read it: the bf16 values alone
    wrote(out, n * sizeof(cpu::bf16));
    out = nullptr;
    return kept;
  }
  cpu::bf16* copy = bf16_output(slot, out, n);
  if (copy != nullptr && read_by == ReadBy::kNextProduct) {
    left_unwritten_[slot] = RoundedCopy{out, n};
    out = nullptr;
  }
  return copy;
}

// The parameters' bf16 mirror. Rounding a weight before each of its products cost a pass over
// every weight twice a step (forward and input gradient); adamw_update now writes the bf16 value
// in the pass that writes the fp32 one, and other writes only mark the mirror out of date.
void CpuBackend::set_parameter_buffer(const float* parameters, size_t count) {
  if (!bf16_) return;
  mirror_.source = parameters;
  mirror_.count = count;
  mirror_.values.reserve(count);
  mirror_.stale = true;
}

void CpuBackend::wrote(const void* pointer, size_t bytes) {
  const char* begin = static_cast<const char*>(pointer);
  auto written_over = [&](const float* source, size_t count) {
    const char* from = reinterpret_cast<const char*>(source);
    return source != nullptr && begin < from + count * sizeof(float) && from < begin + bytes;
  };
  if (written_over(mirror_.source, mirror_.count)) mirror_.stale = true;
  for (RoundedCopy& made : made_by_writer_)
    if (written_over(made.source, made.count)) made = RoundedCopy{};
  for (RoundedCopy& unwritten : left_unwritten_)
    if (written_over(unwritten.source, unwritten.count)) unwritten = RoundedCopy{};
}

const cpu::bf16* CpuBackend::bf16_weight(const float* weight, size_t n) {
  if (mirror_.source == nullptr || weight < mirror_.source ||
      weight + n > mirror_.source + mirror_.count)
    return rounded_to_bf16(kOperandB, weight, n);
  if (mirror_.stale) {
    round_to_bf16(mirror_.values.data(), mirror_.source, mirror_.count);
    mirror_.stale = false;
  }
  return mirror_.values.data() + (weight - mirror_.source);
}

}  // namespace folio

// The CPU backend: matrix products through an optimised BLAS (oneDNN's sgemm by default, see
// gemm.cpp), everything else as OpenMP-parallel loops written so the compiler vectorises them.
// Each op lives in the file named for it (layernorm.cpp, attention.cpp, ...), as in backend/cuda.
//
// One binary for any x86-64 CPU: the backend's files are compiled once per instruction set
// (CMakeLists.txt: baseline x86-64, AVX2 + FMA, AVX-512), each time into its own namespace named
// by FOLIO_CPU_VARIANT, and cpu_isa.cpp picks one at run time (see cpu_isa.h).
#pragma once

#include <array>
#include <map>
#include <vector>

#include "backend/backend.h"
#include "backend/cpu/bf16_tiles.h"
#include "backend/cpu/dropout_masks.h"
#include "backend/cpu/gemm.h"
#include "backend/cpu/huge_pages.h"

#if !defined(FOLIO_CPU_VARIANT)
#define FOLIO_CPU_VARIANT baseline
#endif

namespace folio {
inline namespace FOLIO_CPU_VARIANT {

class CpuBackend final : public Backend {
 public:
  // bf16: the linear layers' products take bf16 operands (--dtype bf16); all else stays fp32.
  explicit CpuBackend(int threads, bool bf16 = false);

  std::string name() const override { return "cpu"; }
  std::string description() const override;
  int threads() const override { return threads_; }

  void* allocate(size_t bytes) override;
  void release(void* pointer) override;
  void copy_to_device(void* device, const void* host, size_t bytes) override;
  void copy_to_host(void* host, const void* device, size_t bytes) override;
  void copy_device(void* to, const void* from, size_t bytes) override;
  void fill_zero(void* device, size_t bytes) override;
  void synchronize() override {}

  void embedding_forward(float* out, const int32_t* tokens, const float* wte, const float* wpe,
                         int B, int T, int C, int first_position) override;
  void embedding_backward(float* dwte, float* dwpe, const float* dout, const int32_t* tokens,
                          int B, int T, int C) override;
  void layernorm_forward(float* out, float* mean, float* rstd, const float* inp,
                         const float* weight, const float* bias, int N, int C,
                         ReadBy out_read_by) override;
  void layernorm_backward(float* dinp, float* dweight, float* dbias, const float* dout,
                          const float* inp, const float* weight, const float* mean,
                          const float* rstd, int N, int C) override;
  void matmul_forward(float* out, const float* inp, const float* weight, const float* bias, int N,
                      int IC, int OC) override;
  void matmul_backward(float* dinp, float* dweight, float* dbias, const float* dout,
                       const float* inp, const float* weight, int N, int IC, int OC,
                       GradientUpdate update) override;
  // saved = each query row's log-sum-exp of its scores, (B, H, T)
  size_t attention_saved_floats(int B, int T, int H, int head_size) const override {
    (void)head_size;
    return static_cast<size_t>(B) * H * T;
  }
  void attention_forward(float* out, float* lse, const float* qkv, int B, int T, int H,
                         int head_size, int q_start, const DropoutSpec& dropout) override;
  void attention_backward(float* dqkv, const float* dout, const float* qkv, const float* lse, int B,
                          int T, int H, int head_size, const DropoutSpec& dropout,
                          ReadBy dqkv_read_by) override;
  void activation_forward(float* out, const float* inp, size_t n, Activation kind,
                          ReadBy read_by) override;
  void activation_backward(float* dinp, const float* dout, const float* inp, size_t n,
                           Activation kind, ReadBy dinp_read_by) override;
  void matmul_activation_forward(float* pre, float* out, const float* inp, const float* weight,
                                 const float* bias, int N, int IC, int OC, Activation kind,
                                 ReadBy out_read_by) override;  // activation.cpp
  void dropout_add_forward(float* out, const float* residual, const float* branch, int B,
                           size_t per_sample, const DropoutSpec& dropout) override;
  void dropout_add_backward(float* dbranch, const float* dout, int B, size_t per_sample,
                            const DropoutSpec& dropout) override;
  void cross_entropy_forward(float* losses, const float* logits, const int32_t* targets, int N,
                             int V, int Vp) override;
  void cross_entropy_backward(float* dlogits, const float* logits, const int32_t* targets, int N,
                              int V, int Vp, float dloss, ReadBy dlogits_read_by) override;
  // The fused pairs (layernorm.cpp): one pass over each row instead of two.
  void dropout_add_layernorm_forward(float* residual_out, float* ln_out, float* mean, float* rstd,
                                     const float* residual, const float* branch,
                                     const float* weight, const float* bias, int B,
                                     size_t per_sample, int C, const DropoutSpec& dropout,
                                     ReadBy ln_out_read_by) override;
  void layernorm_dropout_add_backward(float* dinp, float* dbranch, float* dweight, float* dbias,
                                      const float* dout, const float* inp, const float* weight,
                                      const float* mean, const float* rstd, int B,
                                      size_t per_sample, int C,
                                      const DropoutSpec& dropout) override;
  void adamw_update(float* params, const float* grads, float* m, float* v, size_t n,
                    const AdamWStep& step) override;
  void sum(float* result, const float* x, size_t n) override;
  void sum_of_squares(float* result, const float* x, size_t n) override;
  void scale(float* x, size_t n, float factor) override;
  // With bf16 products: keeps a bf16 copy of the parameters, which adamw_update writes in the
  // same pass as the fp32 values (optimizer.cpp), so products never convert a weight again.
  void set_parameter_buffer(const float* parameters, size_t count) override;
  // With bf16 products: ReLU's output, the LayerNorm and GELU outputs where the step keeps them,
  // and where attention runs on bf16 products (tiles_fit) its input qkv and its output att, are
  // kept as the bf16 values the products read.
  bool keeps_as_bf16(ProductOperand tensor, int head_size) const override {
    if (!bf16_) return false;
    switch (tensor) {
      case ProductOperand::kReluOutput:
      case ProductOperand::kLayerNormOutput:
      case ProductOperand::kGeluOutput:
        return true;
      case ProductOperand::kQkv:
      case ProductOperand::kAttentionOutput:
        return tiles_fit(head_size);
    }
    return false;
  }
  // Keeps the LayerNorm and GELU outputs where they take at most kKeptActivationBudget: there the
  // backward pass's refills cost more than the memory is worth. `baby` (4.7 MiB of them in bf16)
  // recomputed spent about 0.7 ms of an 8.5 ms bf16 step in the refills (Sapphire Rapids, 2
  // threads, --profile); shakespeare_char's (150 MiB in bf16) and GPT-2's (113 MiB at B = 1,
  // T = 1024) are larger than the budget and stay recomputed, their steps' memory as before.
  static constexpr size_t kKeptActivationBudget = size_t(64) << 20;
  bool keeps_recomputable_activations(size_t bytes) const override {
    return bytes <= kKeptActivationBudget;
  }
  void store_as_bf16(const float* tensor, size_t count) override;
  // The batch split (backend.h): every thread its share of the windows (shares one window apart
  // where the thread count does not divide the batch; fewer shares than threads for a batch of
  // fewer windows), where the model is small (kBatchSplitBudget).
  static constexpr size_t kBatchSplitBudget = size_t(64) << 20;
  int batch_split_ways(int batch_size, size_t activation_bytes) const override;
  std::unique_ptr<Backend> make_twin() const override;
  void run_batch_split(int ways, const std::function<void(int share)>& share, float* sum,
                       const std::vector<const float*>& parts, size_t n) override;

 private:
  // The bf16 copies of a product's operands (matmul.cpp): the input or activation, the weight,
  // the output's gradient. Each grows on first use only. A product rounds its operand into its
  // slot, unless the op that wrote the operand made the copy already in the same pass
  // (bf16_output): then the slot names that tensor, and the next product that reads it uses the
  // copy and forgets it.
  enum Bf16Operand { kOperandA, kOperandB, kGradient, kBf16Operands };
  const cpu::bf16* rounded_to_bf16(Bf16Operand slot, const float* x, size_t n);
  // Where an op about to write the n floats at `out` writes their bf16 copy too, for the product
  // that reads them next from `slot`; nullptr (write none) when products are fp32.
  cpu::bf16* bf16_output(Bf16Operand slot, const float* out, size_t n);
  // bf16_output for an op whose output `read_by` reads. Where the copy alone is written (bf16
  // products, ReadBy::kNextProduct) `out` is set to null, for the op to skip the fp32 values, and
  // the tensor is recorded as unwritten, so that a product finding no copy of it fails loudly
  // instead of rounding stale memory. An output kept as bf16 (store_as_bf16) is written there, as
  // its bf16 values alone (`out` set to null), whoever reads it: products alone do.
  cpu::bf16* bf16_output(Bf16Operand slot, float*& out, size_t n, ReadBy read_by);
  // A weight's bf16 operand: from the parameters' mirror when it lies in the parameter buffer
  // (refreshed first if out of date), else rounded into kOperandB.
  const cpu::bf16* bf16_weight(const float* weight, size_t n);
  // matmul_forward with bf16 products (matmul.cpp), with ReLU applied by the product if `relu`;
  // an output kept as bf16 gets the rounded values alone.
  void linear_bf16(float* out, const float* inp, const float* weight, const float* bias, int N,
                   int IC, int OC, bool relu);
  // The n elements at x as bf16 where they lie in a tensor kept so (store_as_bf16), else nullptr:
  // the memory holds fp32.
  cpu::bf16* kept_in_bf16(const float* x, size_t n) const;
  // n bf16 ones: the row vector whose product with a gradient sums its columns (a bias gradient).
  const cpu::bf16* ones_bf16(size_t n);
  // Called by the ops that write memory other than through adamw_update, the products and the
  // copies: a write into the parameter buffer makes the mirror out of date, and a write into a
  // tensor whose writer made its bf16 copy drops that copy. (The fp32 parameters stay the truth;
  // writes that bypass the backend, such as a collective's broadcast, happen before the first
  // product, while the mirror is still out of date from set_parameter_buffer.)
  void wrote(const void* pointer, size_t bytes);
  // Attention with bf16 products on AMX tiles or with AVX512-BF16 (attention_tiles.cpp): with
  // --dtype bf16, on a CPU with either, in the AVX-512 kernels, for heads whose size is a
  // multiple of 32 (a tile's depth).
  bool tiles_fit(int head_size) const {
    return tiles_engine_ != cpu::tiles::Engine::none && head_size % 32 == 0;
  }
  void attention_forward_tiles(float* out, float* lse, const float* qkv, int B, int T, int H,
                               int hs, int q_start, const DropoutSpec& dropout,
                               const cpu::MaskBits& masks);
  void attention_backward_tiles(float* dqkv, const float* dout, const float* qkv, const float* lse,
                                int B, int T, int H, int hs, const DropoutSpec& dropout,
                                const cpu::MaskBits& masks, ReadBy dqkv_read_by);
  // Per-thread scratch for attention (strips of query rows); grows on first use only.
  float* attention_scratch(int thread, size_t floats_per_thread);
  // `floats` zeroed floats for each thread, for per-thread partial sums.
  float* thread_partials(size_t floats);
  // Adds the per-thread partials of thread_partials(floats) into out[0, floats), in thread
  // order, so that sums do not depend on scheduling.
  void reduce_thread_partials(float* out, size_t floats) const;

  int threads_;
  bool bf16_;
  cpu::tiles::Engine tiles_engine_;  // what runs attention's bf16 products, if anything
  std::array<cpu::HugePageBuffer<cpu::bf16>, kBf16Operands> bf16_operands_;
  struct RoundedCopy {
    const float* source = nullptr;  // the tensor whose copy the slot holds, made by its writer
    size_t count = 0;
  };
  std::array<RoundedCopy, kBf16Operands> made_by_writer_;
  // Per slot, the last fp32 output written as its bf16 copy alone, until memory over it is written.
  std::array<RoundedCopy, kBf16Operands> left_unwritten_;
  // The tensors kept as bf16 (store_as_bf16): `count` bf16 elements from `source`, until the
  // allocation holding them is released.
  std::vector<RoundedCopy> kept_in_bf16_;
  std::map<const void*, size_t> allocation_bytes_;  // what allocate() handed out, for release()
  struct ParameterMirror {
    const float* source = nullptr;  // the model's flat fp32 parameters
    size_t count = 0;
    cpu::HugePageBuffer<cpu::bf16> values;  // to_bf16 of each, when not stale
    bool stale = true;
  };
  ParameterMirror mirror_;
  std::vector<cpu::bf16> ones_;
  cpu::DropoutMasks dropout_masks_;  // the forward pass's, for the backward pass
  std::vector<std::vector<float>> scratch_;
  std::vector<float> partials_;
  std::vector<double> sum_partials_;  // one per chunk, for sum() and sum_of_squares()
};

}  // namespace FOLIO_CPU_VARIANT
}  // namespace folio

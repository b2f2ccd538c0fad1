// The CUDA backend: matrix products through cuBLASLt, every other op a kernel of its own (or
// fused with its neighbour), each in the file named for it as in backend/cpu. All work goes to
// one stream in issue order, so an op reads what the op before it wrote without waiting; only
// copies to the host wait, and nothing in a training step does.
//
// Numerics. dtype fp32: every op in fp32 (matrix products on CUDA cores, or on TF32 tensor cores
// with tf32). dtype bf16 (the GPU default): the operands of matrix products (weights and
// activations) are rounded to bf16, the products accumulate in fp32 and come out in fp32; so do
// attention's two products (q k^T and p v, and their gradients) when the head size is a multiple
// of 16. Everything else (LayerNorm, softmax, cross-entropy, dropout, the residual stream,
// gradients, AdamW's master weights and moments) stays fp32, and so do checkpoints.
//
// Where the bf16 operands come from (bf16_copies.cu): the parameters have a bf16 mirror that
// adamw_update writes as it updates them; an activation that a matrix product reads gets a bf16
// copy that the op producing it writes in the same pass (after the first step has shown which
// activations are read that way), or, failing that, one converted just before the product.
//
// Determinism: no atomics anywhere. Parameter gradients that sum over rows (LayerNorm, biases,
// embeddings) sum fixed blocks of rows and then add the blocks in order; the two directions of
// attention's backward pass are separate kernels (one per key block, one per query block)
// rather than one kernel adding into dq with atomics; cuBLASLt runs the algorithm its heuristic
// picks once per shape. The same GPU and inputs give the same bits.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <map>
#include <memory>
#include <vector>

#include "backend/backend.h"
#include "backend/cuda/attention_mask_bits.h"
#include "backend/cuda/cuda_memory.h"

struct __nv_bfloat16;

namespace folio {

namespace cuda {
class Gemm;
struct GemmRequest;
enum class GemmPrecision;
using bf16 = ::__nv_bfloat16;
}  // namespace cuda

int cuda_device_count();  // 0 when there is no driver or no GPU
std::unique_ptr<Backend> make_cuda_backend(int threads, const BackendOptions& options);

// The step values a recorded step reads on the device (StepValues, as kernels see them).
struct LiveStepValues {
  uint32_t dropout_step;
  uint32_t unused;
  double learning_rate;
  int64_t adamw_step;
};

class CudaBackend final : public Backend {
 public:
  CudaBackend(int device, const BackendOptions& options);
  ~CudaBackend() override;
  CudaBackend(const CudaBackend&) = delete;
  CudaBackend& operator=(const CudaBackend&) = delete;

  std::string name() const override { return "cuda"; }
  std::string description() const override;
  void* native_stream() const override { return stream_; }
  bool reads_back_for_free() const override { return false; }
  int threads() const override { return 1; }  // one host thread issues work to the stream

  void* allocate(size_t bytes) override;
  // Never throws (DeviceBuffer's destructor calls it): a failure is reported once, by name.
  void release(void* pointer) noexcept override;
  void copy_to_device(void* device, const void* host, size_t bytes) override;
  void copy_to_host(void* host, const void* device, size_t bytes) override;
  void copy_device(void* to, const void* from, size_t bytes) override;
  void fill_zero(void* device, size_t bytes) override;
  void synchronize() override;

  void embedding_forward(float* out, const int32_t* tokens, const float* wte, const float* wpe,
                         int B, int T, int C, int first_position) override;
  void embedding_backward(float* dwte, float* dwpe, const float* dout, const int32_t* tokens, int B,
                          int T, int C) override;
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
  // ReLU's in-place output kept as bf16 (FOLIO_CUDA_RELU_OUTPUT=bf16): the product writes it in
  // bf16 with the bias and ReLU in its epilogue, and no pass over it follows. Otherwise the
  // product, then activation_forward.
  void matmul_activation_forward(float* pre, float* out, const float* inp, const float* weight,
                                 const float* bias, int N, int IC, int OC, Activation kind,
                                 ReadBy out_read_by) override;
  // With FOLIO_CUDA_RELU_BACKWARD=epilogue, where the forward product wrote ReLU's mask beside a
  // kept ReLU output (linear_into_bf16) and d_fc is written as its bf16 copy alone: fc2's
  // input-gradient product applies the mask in its epilogue and writes d_fc in bf16, and no
  // activation pass runs. Otherwise matmul_backward, then activation_backward.
  void matmul_backward_into_activation(float* dpre, float* dweight, float* dbias, const float* dout,
                                       const float* inp, const float* weight, const float* pre,
                                       int N, int IC, int OC, GradientUpdate update,
                                       Activation kind, ReadBy dpre_read_by) override;
  // Flash attention saves each row's log-sum-exp (B, H, T) and a copy of the output (B, T, A),
  // whose row products with dout the backward pass needs; without it, the probabilities.
  size_t attention_saved_floats(int B, int T, int H, int head_size) const override;
  void attention_forward(float* out, float* saved, const float* qkv, int B, int T, int H,
                         int head_size, int q_start, const DropoutSpec& dropout) override;
  void attention_backward(float* dqkv, const float* dout, const float* qkv, const float* saved,
                          int B, int T, int H, int head_size, const DropoutSpec& dropout,
                          ReadBy dqkv_read_by) override;
  // Writes out whoever reads it: the GPU keeps its activations (no recomputation), and its bf16
  // copies are found by the fp32 tensor's address (bf16_copies.cu).
  void activation_forward(float* out, const float* inp, size_t n, Activation kind,
                          ReadBy read_by) override;
  void activation_backward(float* dinp, const float* dout, const float* inp, size_t n,
                           Activation kind, ReadBy dinp_read_by) override;
  void dropout_add_forward(float* out, const float* residual, const float* branch, int B,
                           size_t per_sample, const DropoutSpec& dropout) override;
  void dropout_add_backward(float* dbranch, const float* dout, int B, size_t per_sample,
                            const DropoutSpec& dropout) override;
  void cross_entropy_forward(float* losses, const float* logits, const int32_t* targets, int N,
                             int V, int Vp) override;
  void cross_entropy_backward(float* dlogits, const float* logits, const int32_t* targets, int N,
                              int V, int Vp, float dloss, ReadBy dlogits_read_by) override;
  void adamw_update(float* params, const float* grads, float* m, float* v, size_t n,
                    const AdamWStep& step) override;
  void sum(float* result, const float* x, size_t n) override;
  void sum_of_squares(float* result, const float* x, size_t n) override;
  void scale(float* x, size_t n, float factor) override;

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

  void set_parameter_buffer(const float* parameters, size_t count) override;
  double peak_flops() const override;
  // With bf16 products (and FOLIO_CUDA_RELU_OUTPUT unset or bf16): a ReLU model's fc (ReLU's
  // output), which only fc2's products and ReLU's backward read (for its signs), is kept as bf16
  // alone: 2 bytes an element where fp32 and a bf16 copy took 6, and no activation pass in the
  // forward.
  bool keeps_as_bf16(ProductOperand tensor, int head_size) const override;
  void store_as_bf16(const float* tensor, size_t count) override;
  // Products that wrote a tensor kept as bf16: in their epilogue, or in fp32 and then rounded (no
  // algorithm for the epilogue): the GPU tests report which ran.
  struct Bf16OutputProducts {
    int in_epilogue = 0, rounded_after = 0;
  };
  const Bf16OutputProducts& bf16_output_products() const { return bf16_output_products_; }
  // fc2's input-gradient products that applied ReLU's mask in their epilogue (the GPU tests ask)
  int relu_gradients_in_epilogue() const { return relu_gradients_in_epilogue_; }

  // Which attention kernels ran, counted per launch of the op: the GPU tests assert that the
  // path they mean to cover (the tensor cores' bf16 kernels, say) was the one taken.
  // The tensor-core attention's kernels: scores through shared memory (attention_flash_bf16.cu),
  // in registers (attention_registers.cu), or in registers with each step's rows staged by
  // cp.async while the block computes on the last.
  enum class AttentionKernels { kWmma, kRegisters, kStaged };
  struct AttentionLaunches {
    int tensor_core_forward = 0, tensor_core_backward = 0;  // bf16 mma kernels
    int register_forward = 0;   // of tensor_core_forward: the kernels in registers
    int register_backward = 0;  // of tensor_core_backward: the kernels in registers
    int staged_forward = 0, staged_backward = 0;            // of those: with their loads staged
    int ldmatrix_forward = 0, ldmatrix_backward = 0;        // of those: fragments by ldmatrix
    // of those: the forward kernels that kept their dropout masks as bits, and the backward
    // passes that read them instead of drawing (FOLIO_ATTENTION_DROPOUT_MASKS=bits)
    int mask_bits_kept = 0, mask_bits_recalled = 0;
    int fp32_flash_forward = 0, fp32_flash_backward = 0;    // flash-style on CUDA cores
    int unfused_forward = 0, unfused_backward = 0;          // probabilities in memory
  };
  const AttentionLaunches& attention_launches() const { return attention_launches_; }
  // Products the plain cuBLAS GEMM did because cuBLASLt had no algorithm (gemm.h).
  int plain_cublas_products() const;

  bool supports_step_capture() const override { return true; }
  bool keeps_recomputable_activations(size_t /*bytes*/) const override { return true; }
  void begin_step_capture() override;
  void end_step_capture() override;
  void replay_step(const StepValues& values) override;
  uint64_t device_memory_frees() const override;

 private:
  // Grow-only scratch memory, one buffer per purpose, sized by the first step that needs it.
  enum class Scratch {
    kOperandA,              // bf16 operands converted just before a product: the first,
    kOperandB,              // the second,
    kOperandC,              // and the third of matmul_backward's
    kBiasGradient,          // a bias gradient from cuBLASLt's epilogue, before adding
    kPartialSums,           // per-block partial sums of parameter gradients
    kReduction,             // partial sums of sum() and sum_of_squares()
    kEmbeddingSort,         // positions sorted by token, for the embedding gradient
    kAttentionRowDot,       // flash backward: rowsum(dout * out) per (b, h, t)
    kAttentionHeads,        // unfused attention: q, k, v, dout laid out by head
    kAttentionWeights,      // unfused attention: dropped probabilities, then dS
    kAttentionScratch,      // unfused attention: d(dropped probabilities)
    kAttentionHeadOutputs,  // unfused attention: outputs and gradients by head
    kProductOutput,         // a product's fp32 output before it is rounded into a bf16 tensor
    kCount
  };
  void* scratch(Scratch slot, size_t bytes);

  // A bf16 copy of an fp32 activation that matrix products read (bf16_copies.cu).
  struct Bf16Copy {
    const float* source = nullptr;
    size_t valid = 0;  // leading floats of `source` the copy matches; 0 once it is out of date
    // false: the writer wrote the copy alone (ReadBy::kNextProduct), and `source` holds stale
    // values until the next write
    bool fp32_written = true;
    DeviceMemory memory;
    size_t capacity() const { return memory.bytes() / 2; }
  };
  // The parameters' bf16 mirror, refreshed by adamw_update.
  struct ParameterMirror {
    const float* source = nullptr;
    size_t count = 0;
    DeviceMemory memory;
    bool stale = true;  // something other than adamw_update wrote the parameters
  };

  // Every op reports what it writes: bf16 copies of what was there go out of date.
  void wrote(const void* pointer, size_t bytes);
  // The kept copy of `out` that an op about to write all n floats there writes too (marked
  // valid, fp32 written), or null.
  Bf16Copy* copy_to_write(const float* out, size_t n);
  // An op about to write all n floats at `out`: where it should also write them in bf16 (the
  // copy a matrix product will read), or null when nothing reads them that way.
  cuda::bf16* bf16_output(const float* out, size_t n);
  // The same for an output that `read_by` reads; where only the next product reads it and a copy
  // is kept, `out` becomes null: the op writes the copy alone, which the product reads (and
  // fp32_values() widens for any other reader).
  cuda::bf16* bf16_output(float*& out, size_t n, ReadBy read_by);
  // bf16 operands of a matrix product: the up-to-date copy, or one converted now.
  const cuda::bf16* bf16_activation(const float* x, size_t n, Scratch fallback);
  const cuda::bf16* bf16_weight(const float* w, size_t n, Scratch fallback);
  // The part of the parameter mirror shadowing params[0, n), or null.
  cuda::bf16* mirror_of(const float* params, size_t n);
  void refresh_parameter_mirror();
  void convert_to_bf16(cuda::bf16* out, const float* x, size_t n);
  // The n elements at x, in a tensor kept as bf16 (store_as_bf16), else null (x holds fp32).
  cuda::bf16* kept_in_bf16(const void* x, size_t n) const;
  // The n elements at x where their bf16 values are all there is: x lies in a tensor kept as bf16,
  // or x is an output written as its copy alone. Null where x holds fp32 values.
  const cuda::bf16* bf16_alone(const float* x, size_t n) const;
  // x itself, or where bf16_alone(x, n), its n elements widened to fp32 in `slot`.
  const float* fp32_values(const float* x, size_t n, Scratch slot);
  // out (N, OC), kept as bf16, = inp @ weight^T + bias, then ReLU if `relu`: in the product's
  // epilogue where cuBLASLt offers it, else in fp32 and rounded.
  void linear_into_bf16(cuda::bf16* out, const float* inp, const float* weight, const float* bias,
                        int N, int IC, int OC, bool relu);
  // ReLU's mask (one bit an element, cuBLASLt's layout) of a kept ReLU output of rows x columns:
  // written by the product that writes the output, read by the product of the layer after it in
  // the backward pass; invalid once anything else writes the output (wrote()).
  struct ReluMask {
    const void* output = nullptr;
    int rows = 0, columns = 0;
    int64_t ld_bits = 0;  // a row's bits: columns rounded up to a multiple of 128
    DeviceMemory bits;
    bool valid = false;
  };
  // The mask to write beside `output` (made the first time; null while a step is recorded, where
  // nothing may be allocated), and the valid mask of `output`, or null.
  ReluMask* relu_mask_to_write(const void* output, int rows, int columns);
  const ReluMask* valid_relu_mask(const void* output, int rows, int columns) const;
  // Attention's dropout masks as bits (FOLIO_ATTENTION_DROPOUT_MASKS=bits), kept by the register
  // forward kernel for the backward kernels of the same layer: one record a saved tensor (one a
  // layer), the memory grown where a step runs op by op, never while one is recorded.
  struct AttentionMasks {
    const float* saved = nullptr;  // the layer's saved tensor (lse and output copy)
    DropoutSpec dropout;           // of the masks the words hold
    int B = 0, T = 0, H = 0;
    DeviceMemory words;
    bool kept = false;
  };
  // Where the forward pass with `dropout` over `saved` keeps its masks, or none (none while a step
  // is recorded and the memory would have to grow).
  cuda::AttentionMaskBits attention_masks_to_keep(const float* saved, const DropoutSpec& dropout,
                                                  int B, int T, int H);
  // The masks the last forward pass over `saved` kept, if it had exactly this dropout and shape.
  cuda::AttentionMaskBits kept_attention_masks(const float* saved, const DropoutSpec& dropout,
                                               int B, int T, int H);
  // matmul_backward's two halves: dinp (N, IC) = dout @ weight, and the weight's and bias's
  // gradients.
  void input_gradient_product(float* dinp, const void* dout_operand, const float* weight, int N,
                              int IC, int OC, bool bf16_operands);
  void weight_gradient_products(float* dweight, float* dbias, const void* dout_operand,
                                const float* inp, int N, int IC, int OC, bool bf16_operands,
                                GradientUpdate update);

  // Whether a product runs on bf16 operands: with dtype bf16, when every operand's rows start on
  // 16-byte boundaries (leading dimensions of whole multiples of 8), which the tensor cores'
  // loads need; other products (a head width of 30, a vocabulary of 65) run in fp32.
  bool bf16_product(std::initializer_list<int> leading_dimensions) const;
  cuda::GemmPrecision precision(bool bf16_operands) const;
  // What a matrix product reads as operand x (n floats): x itself, or its bf16 form.
  const void* matmul_operand(const float* x, size_t n, bool is_weight, bool bf16_operands,
                             Scratch fallback);
  void run_gemm(const cuda::GemmRequest& request);
  bool try_gemm(const cuda::GemmRequest& request);  // false: the epilogue asked for is unavailable

  bool uses_flash_attention(int head_size) const;
  bool uses_tensor_core_attention(int head_size) const;
  void unfused_attention_forward(float* out, float* probs, const float* qkv, int B, int T, int H,
                                 int hs, int q_start, const DropoutSpec& dropout);
  void unfused_attention_backward(float* dqkv, const float* dout, const float* qkv,
                                  const float* probs, int B, int T, int H, int hs,
                                  const DropoutSpec& dropout);

  // The step value pointer kernels read while a step is being recorded; null otherwise.
  const uint32_t* live_dropout_step() const;
  const LiveStepValues* live_step_values() const;
  void stage_copy_to_device(void* device, const void* host, size_t bytes);
  void no_capture(const char* what) const;  // throws when a step is being recorded

  int device_;
  BackendOptions options_;
  bool bf16_;  // matrix products in bf16
  std::string gpu_name_;
  int sm_count_ = 0, compute_major_ = 0, compute_minor_ = 0, clock_khz_ = 0;
  cudaStream_t stream_ = nullptr;
  std::unique_ptr<cuda::Gemm> gemm_;

  std::map<void*, size_t> allocations_;  // what allocate() handed out, for release()
  std::vector<DeviceMemory> scratch_;
  std::vector<Bf16Copy> bf16_copies_;
  ParameterMirror mirror_;
  struct KeptBf16 {  // a tensor kept as bf16 alone: its bytes
    const char* begin;
    size_t bytes;
  };
  std::vector<KeptBf16> kept_bf16_;
  bool relu_output_in_bf16_ = false;  // FOLIO_CUDA_RELU_OUTPUT: bf16 (the default) or fp32
  bool copies_alone_ = true;          // FOLIO_CUDA_GRADIENT_COPIES: alone (the default) or both
  bool relu_mask_in_products_ = false;  // FOLIO_CUDA_RELU_BACKWARD: kernel (default) or epilogue
  std::vector<ReluMask> relu_masks_;
  int relu_gradients_in_epilogue_ = 0;
  Bf16OutputProducts bf16_output_products_;

  // Copies to the device go through page-locked slots, so that they neither wait for the GPU nor
  // make the GPU wait; a slot is reused once the copy that last used it has been done.
  struct StagingSlot {
    PinnedMemory host;
    CudaEvent copied;
    bool pending = false;
  };
  std::vector<StagingSlot> staging_;
  size_t next_staging_ = 0;

  // Recording and replaying a step.
  bool capturing_ = false;
  struct RecordedCopy {
    void* device;
    const void* host;
    size_t bytes;
  };
  std::vector<RecordedCopy> recorded_copies_;
  DeviceMemory live_values_;  // one LiveStepValues
  CudaGraph graph_;
  uint64_t frees_at_recording_ = 0;  // device_frees() when graph_ was made
  void abandon_step_capture() noexcept;  // ends a recording that an error cut short

  AttentionLaunches attention_launches_;
  // FOLIO_ATTENTION_FORWARD and FOLIO_ATTENTION_BACKWARD at construction (the defaults are in
  // cuda_backend.cu).
  AttentionKernels forward_kernels_ = AttentionKernels::kRegisters;
  AttentionKernels backward_kernels_ = AttentionKernels::kRegisters;
  bool ldmatrix_fragments_ = false;  // FOLIO_ATTENTION_FRAGMENTS=ldmatrix (cuda_backend.cu)
  bool attention_mask_bits_ = false;  // FOLIO_ATTENTION_DROPOUT_MASKS=bits (cuda_backend.cu)
  std::vector<AttentionMasks> attention_masks_;
};

}  // namespace folio

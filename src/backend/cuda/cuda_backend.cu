// The CUDA backend's device, stream and memory; copies to and from the host; recording and
// replaying a training step as a CUDA graph.
#include "backend/cuda/cuda_backend.h"

#include <algorithm>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <string>

#include "backend/cuda/gemm.h"
#include "backend/cuda/kernel_helpers.cuh"
#include "core/error.h"

namespace folio {

namespace {

constexpr size_t kGemmWorkspaceBytes = size_t(32) << 20;  // what cuBLASLt wants on Hopper
constexpr int kStagingSlots = 16;
constexpr size_t kStagingSlotBytes = size_t(256) << 10;
// Copies larger than this (whole parameter sets, outside training steps) skip the staging slots.
constexpr size_t kLargestStagedCopy = size_t(16) << 20;

__global__ void probe_kernel() {}

__global__ void set_live_step_values(LiveStepValues* live, LiveStepValues values) {
  *live = values;
}

}  // namespace

int cuda_device_count() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();  // no driver or no device: not an error for a CPU run
    return 0;
  }
  return count;
}

std::unique_ptr<Backend> make_cuda_backend(int /*threads*/, const BackendOptions& options) {
  // Ranks of a job on one machine take the GPUs in turn, by local rank (several ranks share a GPU
  // when there are more ranks than GPUs).
  const int count = std::max(1, cuda_device_count());
  return std::make_unique<CudaBackend>(options.device_index % count, options);
}

namespace {

// Which tensor-core attention kernels run, each side: "wmma" (attention_flash_bf16.cu, products
// through shared memory), "registers" (attention_registers.cu, FlashAttention-2's arrangement;
// its backward takes heads up to 64 and larger heads use wmma) or "staged" (the register kernels
// with each step's rows copied by cp.async while the block computes on the last; heads up to
// 64, larger as "registers"). Measured on an H200 (bench/gpu/gpu_check.sh, 2026-11-28, every GPU
// test passing with all three, racecheck clean on the register and staged ones):
// shakespeare_char's step 7.24 ms staged on both sides, 7.37 registers, 8.15 wmma (ncu: the
// query-gradient kernel 0.63 ms a step staged against 0.75, the others within 1%); GPT-2 at
// T = 1024 49.96 ms staged, 50.17 registers, 60.16 wmma. FOLIO_ATTENTION_FORWARD and
// FOLIO_ATTENTION_BACKWARD choose any of the three.
constexpr const char* kDefaultForwardKernels = "staged";
constexpr const char* kDefaultBackwardKernels = "staged";

// The environment variable's value (`default_value` where unset or empty), one of `choices`:
// anything else is refused, naming the variable and what it takes ("expected a, b or c").
std::string choice_from_environment(const char* variable, const char* default_value,
                                    std::initializer_list<const char*> choices) {
  const char* set = std::getenv(variable);
  const std::string value = set && *set ? set : default_value;
  std::string expected;
  size_t index = 0;
  for (const char* choice : choices) {
    if (value == choice) return value;
    if (index > 0) expected += index + 1 == choices.size() ? " or " : ", ";
    expected += choice;
    ++index;
  }
  throw Error(std::string(variable) + "=" + value + ": expected " + expected);
}

CudaBackend::AttentionKernels attention_kernels(const char* variable, const char* default_kernels) {
  const std::string value =
      choice_from_environment(variable, default_kernels, {"registers", "staged", "wmma"});
  if (value == "wmma") return CudaBackend::AttentionKernels::kWmma;
  return value == "staged" ? CudaBackend::AttentionKernels::kStaged
                           : CudaBackend::AttentionKernels::kRegisters;
}

// FOLIO_ATTENTION_FRAGMENTS: how the register kernels read their products' fragments from shared
// memory: "words" (the default), each thread its own pairs with 32- and 16-bit loads, or
// "ldmatrix", a warp's four 8 x 8 matrices an instruction (the same registers, so the same
// results: attention_registers.cu proves the lanes' addresses at compile time). In the SASS for
// sm_90 at head size 64 (cuobjdump, 2026-11-28; staged, from the first to the last HMMA, the
// loops' bodies) ldmatrix takes the forward kernel from 2181 to 1955 instructions, the key/value
// kernel from 1302 to 1085 and the query kernel from 1149 to 1020. Written without a GPU: "words"
// stays the default until a GPU session has run and timed "ldmatrix" (gpu_check.sh).
bool ldmatrix_fragments() {
  return choice_from_environment("FOLIO_ATTENTION_FRAGMENTS", "words", {"words", "ldmatrix"}) ==
         "ldmatrix";
}

// FOLIO_ATTENTION_DROPOUT_MASKS: "draw" (the default) has the register attention's backward
// kernels draw the dropout masks of the weights again with Philox, as the forward kernel did;
// "bits" has the forward kernel keep them as bits (one a weight: 3 MB a layer at
// shakespeare_char's shapes) and the backward kernels read them, as the CPU's attention does. By
// the last ncu (2026-11-28, H200) the two backward kernels take 1.66 of the step's 7.2 ms, and a
// Philox call for four weights is about a hundred instructions there beside their products.
// Written without a GPU: "draw" stays the default until a GPU session has run and timed "bits"
// (gpu_check.sh).
bool attention_mask_bits() {
  return choice_from_environment("FOLIO_ATTENTION_DROPOUT_MASKS", "draw", {"draw", "bits"}) ==
         "bits";
}

// FOLIO_CUDA_RELU_OUTPUT: "bf16" (the default) keeps a ReLU model's fc as bf16 alone (the product
// writes it with the bias and ReLU in its epilogue: no activation pass, and 2 bytes an element
// where fp32 and its bf16 copy took 6); "fp32" keeps fp32 and a copy. On an H200 (2026-11-28)
// shakespeare_char's step took 7.27 ms with bf16 against 7.37 with fp32, 7.15 with the staged
// attention beside it; CudaOps.ReluOutputKeptInBf16 and CudaModel.ReluOutputKeptInBf16 passed.
bool relu_output_in_bf16() {
  return choice_from_environment("FOLIO_CUDA_RELU_OUTPUT", "bf16", {"fp32", "bf16"}) == "bf16";
}

// FOLIO_CUDA_GRADIENT_COPIES: "alone" (the default) lets an op whose output the next product alone
// reads (ReadBy::kNextProduct: ReLU's or GELU's input gradient, the logits' gradient) write only
// the bf16 copy that product reads, once one is kept; "both" writes the fp32 values beside it, as
// before (bf16_copies.cu). Written without a GPU on 2026-11-28: "both" is the way back, and what
// gpu_check.sh times it against.
bool gradient_copies_alone() {
  return choice_from_environment("FOLIO_CUDA_GRADIENT_COPIES", "alone", {"alone", "both"}) ==
         "alone";
}

// FOLIO_CUDA_RELU_BACKWARD: where a ReLU model's fc is kept as bf16 (FOLIO_CUDA_RELU_OUTPUT=bf16),
// "kernel" (the default) runs ReLU's backward as a pass of its own over fc2's input gradient;
// "epilogue" has fc's product write ReLU's mask beside fc (a bit an element) and fc2's input-
// gradient product apply it and write d_fc in bf16 (cuBLASLt's RELU_AUX_BIAS and DRELU
// epilogues): no pass, and no fp32 gradient written and read back (at shakespeare_char's shapes
// about 250 MB a layer less). Written without a GPU on 2026-11-28: "kernel" stays the default
// until a GPU session has run and timed "epilogue" (gpu_check.sh).
bool relu_mask_in_products() {
  return choice_from_environment("FOLIO_CUDA_RELU_BACKWARD", "kernel", {"kernel", "epilogue"}) ==
         "epilogue";
}

const char* name_of(CudaBackend::AttentionKernels kernels) {
  switch (kernels) {
    case CudaBackend::AttentionKernels::kWmma:
      return "wmma";
    case CudaBackend::AttentionKernels::kRegisters:
      return "in registers";
    case CudaBackend::AttentionKernels::kStaged:
      return "in registers, loads staged";
  }
  return "";
}

}  // namespace

CudaBackend::CudaBackend(int device, const BackendOptions& options)
    : device_(device), options_(options), bf16_(options.dtype != "fp32") {
  check_cuda(cudaSetDevice(device_), "cudaSetDevice");
  cudaDeviceProp properties{};
  check_cuda(cudaGetDeviceProperties(&properties, device_), "cudaGetDeviceProperties");
  gpu_name_ = properties.name;
  sm_count_ = properties.multiProcessorCount;
  forward_kernels_ = attention_kernels("FOLIO_ATTENTION_FORWARD", kDefaultForwardKernels);
  backward_kernels_ = attention_kernels("FOLIO_ATTENTION_BACKWARD", kDefaultBackwardKernels);
  ldmatrix_fragments_ = ldmatrix_fragments();
  attention_mask_bits_ = attention_mask_bits();
  relu_output_in_bf16_ = relu_output_in_bf16();
  copies_alone_ = gradient_copies_alone();
  const bool relu_backward_in_epilogue = relu_mask_in_products();  // read even where unused
  relu_mask_in_products_ = relu_output_in_bf16_ && relu_backward_in_epilogue;
  compute_major_ = properties.major;
  compute_minor_ = properties.minor;
  if (cudaDeviceGetAttribute(&clock_khz_, cudaDevAttrClockRate, device_) != cudaSuccess) {
    cudaGetLastError();
    clock_khz_ = 0;
  }
  // A GPU older than the architectures this binary was compiled for has no image of its kernels.
  cudaFuncAttributes attributes{};
  if (cudaFuncGetAttributes(&attributes, probe_kernel) != cudaSuccess) {
    cudaGetLastError();
    throw Error("the GPU " + gpu_name_ + " (sm_" + std::to_string(compute_major_) +
                std::to_string(compute_minor_) +
                ") is older than this folio's CUDA kernels were compiled for: rebuild with "
                "-DFOLIO_CUDA_ARCHS=" +
                std::to_string(compute_major_) + std::to_string(compute_minor_) +
                " (sm_80 or newer) or use --device cpu");
  }
  check_cuda(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
  gemm_ = std::make_unique<cuda::Gemm>(kGemmWorkspaceBytes);
  scratch_.resize(static_cast<size_t>(Scratch::kCount));
  staging_.resize(kStagingSlots);
  for (StagingSlot& slot : staging_) {
    slot.host = PinnedMemory(kStagingSlotBytes);
    slot.copied = make_event();
  }
  live_values_ = DeviceMemory(sizeof(LiveStepValues));
  check_cuda(cudaMemsetAsync(live_values_.get(), 0, sizeof(LiveStepValues), stream_),
             "cudaMemsetAsync");
}

// Destructors never throw: after a kernel's fault every CUDA call fails with the same sticky
// error, which check_cuda has usually thrown already; anything else is reported once.
CudaBackend::~CudaBackend() {
  abandon_step_capture();
  // Memory below is freed only after the work using it is done.
  report_cuda_error_once(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
  report_cuda_error_once(cudaStreamDestroy(stream_), "cudaStreamDestroy");
}

void CudaBackend::abandon_step_capture() noexcept {
  if (!capturing_) return;
  capturing_ = false;
  set_recording_step(false);
  cudaGraph_t abandoned = nullptr;
  if (cudaStreamEndCapture(stream_, &abandoned) == cudaSuccess && abandoned)
    cudaGraphDestroy(abandoned);
  cudaGetLastError();  // an invalidated recording is no error of its own
}

std::string CudaBackend::description() const {
  const std::string precision = bf16_           ? "bf16 matmuls"
                                : options_.tf32 ? "fp32 (TF32 matmuls)"
                                                : "fp32";
  std::string text = "cuda (" + gpu_name_ + ", " + std::to_string(sm_count_) + " SMs, sm_" +
                     std::to_string(compute_major_) + std::to_string(compute_minor_) + "; " +
                     precision +
                     (options_.flash_attention ? ", flash attention" : ", attention unfused");
  if (!options_.fused_kernels) text += ", kernels unfused";
  // The attention kernels are bf16's tensor-core attention (fp32 runs the fp32 flash kernels); the
  // register backward serves heads of up to 64 and leaves larger heads to the WMMA kernels.
  if (bf16_ && options_.flash_attention) {
    text += std::string(", attention forward ") + name_of(forward_kernels_);
    text += std::string(", backward ") + name_of(backward_kernels_);
    if (backward_kernels_ != AttentionKernels::kWmma) text += " (heads up to 64)";
    if (ldmatrix_fragments_ && (forward_kernels_ != AttentionKernels::kWmma ||
                                backward_kernels_ != AttentionKernels::kWmma))
      text += ", fragments by ldmatrix";
    if (attention_mask_bits_ && backward_kernels_ != AttentionKernels::kWmma)
      text += ", dropout masks kept as bits";
  }
  if (keeps_as_bf16(ProductOperand::kReluOutput, 0)) text += ", a ReLU model's fc kept in bf16";
  if (keeps_as_bf16(ProductOperand::kReluOutput, 0) && relu_mask_in_products_)
    text += ", ReLU's backward in the products";
  if (bf16_ && options_.fused_kernels && copies_alone_)
    text += ", gradients only products read written in bf16 alone";
  return text + ")";
}

double CudaBackend::peak_flops() const {
  // Datasheet dense figures (bf16, TF32, fp32 on CUDA cores); other GPUs from clock and SMs.
  struct Peak {
    double bf16, tf32, fp32;
  };
  Peak peak{0, 0, 0};
  const bool hopper =
      gpu_name_.find("H100") != std::string::npos || gpu_name_.find("H200") != std::string::npos;
  if (hopper && gpu_name_.find("PCIe") != std::string::npos) {
    peak = {756e12, 378e12, 51.2e12};
  } else if (hopper) {
    peak = {989.4e12, 494.7e12, 66.9e12};
  } else if (gpu_name_.find("A100") != std::string::npos) {
    peak = {312e12, 156e12, 19.5e12};
  } else if (clock_khz_ > 0) {
    // Per SM and clock: sm_90 4096 bf16 / 2048 TF32 / 256 fp32 FLOP; sm_80 half of that.
    const double per_clock = compute_major_ >= 9 ? 4096 : compute_major_ == 8 ? 2048 : 0;
    const double scale = per_clock * sm_count_ * clock_khz_ * 1e3;
    peak = {scale, scale / 2, scale / 16};
  }
  return bf16_ ? peak.bf16 : options_.tf32 ? peak.tf32 : peak.fp32;
}

// ---- memory -------------------------------------------------------------------------------------

void CudaBackend::no_capture(const char* what) const {
  if (capturing_)
    throw Error(std::string("internal: ") + what + " while a training step is being recorded");
}

void* CudaBackend::allocate(size_t bytes) {
  no_capture("allocate()");
  void* pointer = nullptr;
  const std::string what = "cudaMalloc of " + std::to_string(bytes >> 20) + " MiB";
  check_cuda(cudaMalloc(&pointer, bytes > 0 ? bytes : 1), what.c_str());
  allocations_[pointer] = bytes;
  return pointer;
}

void CudaBackend::release(void* pointer) noexcept {
  // Only an error unwinding through a recorded step frees memory while recording: end it first
  // (cudaFree may not be recorded).
  abandon_step_capture();
  auto allocation = allocations_.find(pointer);
  if (allocation == allocations_.end()) {
    report_cuda_error_once(cudaErrorInvalidDevicePointer, "release() of memory folio never allocated");
    return;
  }
  const char* begin = static_cast<const char*>(pointer);
  const char* end = begin + allocation->second;
  auto inside = [&](const float* p) {
    return reinterpret_cast<const char*>(p) >= begin && reinterpret_cast<const char*>(p) < end;
  };
  std::erase_if(bf16_copies_, [&](const Bf16Copy& copy) { return inside(copy.source); });
  std::erase_if(kept_bf16_, [&](const KeptBf16& kept) {
    return inside(reinterpret_cast<const float*>(kept.begin));
  });
  std::erase_if(relu_masks_, [&](const ReluMask& mask) {
    return inside(static_cast<const float*>(mask.output));
  });
  std::erase_if(attention_masks_, [&](const AttentionMasks& masks) { return inside(masks.saved); });
  if (mirror_.source != nullptr && inside(mirror_.source)) mirror_ = ParameterMirror{};
  allocations_.erase(allocation);
  DeviceAllocator::release(pointer);  // counted: a recorded step may point into it
}

void* CudaBackend::scratch(Scratch slot, size_t bytes) {
  DeviceMemory& buffer = scratch_[static_cast<size_t>(slot)];
  if (buffer.bytes() < bytes) {
    no_capture("growing scratch memory (run one step before recording)");
    buffer = DeviceMemory();  // free first: the old and new buffer need not fit together
    buffer = DeviceMemory(bytes);
  }
  return buffer.get();
}

void CudaBackend::stage_copy_to_device(void* device, const void* host, size_t bytes) {
  if (bytes > kLargestStagedCopy) {
    // Rare and outside training steps: the driver stages pageable memory itself; wait for it.
    check_cuda(cudaMemcpyAsync(device, host, bytes, cudaMemcpyHostToDevice, stream_),
               "cudaMemcpyAsync to the device");
    check_cuda(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
    return;
  }
  StagingSlot& slot = staging_[next_staging_];
  next_staging_ = (next_staging_ + 1) % staging_.size();
  if (slot.pending) check_cuda(cudaEventSynchronize(slot.copied.get()), "cudaEventSynchronize");
  slot.pending = false;
  if (slot.host.bytes() < bytes) slot.host = PinnedMemory(bytes);
  std::memcpy(slot.host.get(), host, bytes);
  check_cuda(cudaMemcpyAsync(device, slot.host.get(), bytes, cudaMemcpyHostToDevice, stream_),
             "cudaMemcpyAsync to the device");
  check_cuda(cudaEventRecord(slot.copied.get(), stream_), "cudaEventRecord");
  slot.pending = true;
}

void CudaBackend::copy_to_device(void* device, const void* host, size_t bytes) {
  if (bytes == 0) return;
  wrote(device, bytes);
  if (capturing_) {
    recorded_copies_.push_back({device, host, bytes});  // done again before every replay
    return;
  }
  stage_copy_to_device(device, host, bytes);
}

void CudaBackend::copy_to_host(void* host, const void* device, size_t bytes) {
  if (bytes == 0) return;
  no_capture("copy_to_host()");
  check_cuda(cudaMemcpyAsync(host, device, bytes, cudaMemcpyDeviceToHost, stream_),
             "cudaMemcpyAsync to the host");
  check_cuda(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
}

void CudaBackend::copy_device(void* to, const void* from, size_t bytes) {
  if (bytes == 0) return;
  wrote(to, bytes);
  check_cuda(cudaMemcpyAsync(to, from, bytes, cudaMemcpyDeviceToDevice, stream_),
             "cudaMemcpyAsync on the device");
}

void CudaBackend::fill_zero(void* device, size_t bytes) {
  if (bytes == 0) return;
  wrote(device, bytes);
  check_cuda(cudaMemsetAsync(device, 0, bytes, stream_), "cudaMemsetAsync");
}

void CudaBackend::synchronize() {
  no_capture("synchronize()");
  check_cuda(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
}

// ---- recording a step ---------------------------------------------------------------------------

const uint32_t* CudaBackend::live_dropout_step() const {
  if (!capturing_) return nullptr;
  return reinterpret_cast<const uint32_t*>(live_values_.as<char>() +
                                           offsetof(LiveStepValues, dropout_step));
}

const LiveStepValues* CudaBackend::live_step_values() const {
  return capturing_ ? live_values_.as<LiveStepValues>() : nullptr;
}

void CudaBackend::begin_step_capture() {
  no_capture("begin_step_capture()");
  // A conversion recorded into the step would run on every replay; do it once now.
  if (mirror_.source != nullptr && mirror_.stale) refresh_parameter_mirror();
  recorded_copies_.clear();
  check_cuda(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal),
             "cudaStreamBeginCapture");
  capturing_ = true;
  set_recording_step(true);
}

void CudaBackend::end_step_capture() {
  if (!capturing_) throw Error("internal: end_step_capture() without begin_step_capture()");
  capturing_ = false;
  set_recording_step(false);
  cudaGraph_t graph = nullptr;
  check_cuda(cudaStreamEndCapture(stream_, &graph), "cudaStreamEndCapture");
  cudaGraphExec_t instance = nullptr;
  const cudaError_t status = cudaGraphInstantiate(&instance, graph, 0);
  cudaGraphDestroy(graph);
  check_cuda(status, "cudaGraphInstantiate");
  graph_ = CudaGraph(instance);
  frees_at_recording_ = device_frees();
}

uint64_t CudaBackend::device_memory_frees() const { return device_frees(); }

void CudaBackend::replay_step(const StepValues& values) {
  no_capture("replay_step()");
  if (!graph_) throw Error("internal: replay_step() before a step was recorded");
  // Scratch memory that grew (an evaluation's forward pass, say) or a buffer released since the
  // recording: it may point at freed memory. TrainingStep records again before this can happen.
  if (frees_at_recording_ != device_frees())
    throw Error("internal: replay_step() after device memory was freed since the recording");
  const LiveStepValues live{values.dropout_step, 0, values.learning_rate, values.adamw_step};
  set_live_step_values<<<1, 1, 0, stream_>>>(live_values_.as<LiveStepValues>(), live);
  check_launch("set_live_step_values");
  for (const RecordedCopy& copy : recorded_copies_)
    stage_copy_to_device(copy.device, copy.host, copy.bytes);
  check_cuda(cudaGraphLaunch(graph_.get(), stream_), "cudaGraphLaunch");
  // FOLIO_CUDA_SYNC=1: a replayed step runs as one launch; --graph=false names its kernels.
  if (sync_after_every_launch())
    check_cuda(cudaStreamSynchronize(stream_),
               "the replayed training step (FOLIO_CUDA_SYNC=1; `folio bench --graph=false` "
               "checks its kernels one by one)");
}

}  // namespace folio

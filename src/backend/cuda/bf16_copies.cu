// The bf16 operands of matrix products (dtype bf16): the parameters' mirror, and copies of the
// fp32 activations that products read.
//
// The interface passes fp32 activations, so a product's bf16 operand must come from somewhere.
// Converting just before each product costs a read of the fp32 tensor and a write of the bf16
// one. Instead the op that produces the tensor writes the bf16 copy in the same pass (a write of
// half the size, and no extra read): LayerNorm's output, attention's, the nonlinearity's, and the
// gradients that backward products read. Which tensors need a copy is learned, not declared: the
// first time a product reads an fp32 tensor it converts it into a copy kept for that address,
// and from then on the tensor's producer refreshes the copy as it writes the tensor.
//
// Every op reports the memory it writes (wrote()); a copy that no longer matches its tensor is
// marked out of date, so a stale copy is never read. This bookkeeping is host-side and follows
// the order ops are issued in, which is the order the single stream runs them.
//
// An output that the next product alone reads (ReadBy::kNextProduct: ReLU's or GELU's input
// gradient d_fc, read by fc's two backward products) is written as its copy alone where one is
// kept, as the CPU does: 2 bytes an element where the fp32 values and the copy took 6. Its fp32
// values are then out of date until the next write; fp32_values() widens the copy for a reader
// that needs fp32, and the products (and the bias gradient beside them) read the copy.
//
// A tensor kept as bf16 alone (store_as_bf16: ReLU's output with FOLIO_CUDA_RELU_OUTPUT=bf16)
// needs no copy: a product reads it as it is, and an fp32 product (a leading dimension not a
// multiple of 8) reads it widened into scratch memory. With FOLIO_CUDA_RELU_BACKWARD=epilogue the
// product that writes it also writes ReLU's mask (a bit an element), kept here by the output's
// address until something else writes the output; fc2's backward product applies it (matmul.cu).
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/kernel_helpers.cuh"

namespace folio {

namespace {

// Products smaller than this convert on the fly: generation's one-row products, small models.
constexpr size_t kSmallestKeptCopy = size_t(1) << 16;
constexpr size_t kMostKeptCopies = 256;

__global__ void convert_to_bf16_kernel(cuda::bf16* out, const float* x, size_t n) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n;
       i += size_t(gridDim.x) * blockDim.x)
    out[i] = __float2bfloat16(x[i]);
}

__global__ void widen_from_bf16_kernel(float* out, const cuda::bf16* x, size_t n) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n;
       i += size_t(gridDim.x) * blockDim.x)
    out[i] = __bfloat162float(x[i]);
}

bool overlaps(const void* a, size_t a_bytes, const void* b, size_t b_bytes) {
  const char* a0 = static_cast<const char*>(a);
  const char* b0 = static_cast<const char*>(b);
  return a0 < b0 + b_bytes && b0 < a0 + a_bytes;
}

}  // namespace

void CudaBackend::convert_to_bf16(cuda::bf16* out, const float* x, size_t n) {
  if (n == 0) return;
  const unsigned blocks = std::min(cuda::blocks_for(n, cuda::kBlockThreads), 8u * sm_count_);
  convert_to_bf16_kernel<<<blocks, cuda::kBlockThreads, 0, stream_>>>(out, x, n);
  check_launch("convert_to_bf16");
}

void CudaBackend::wrote(const void* pointer, size_t bytes) {
  for (Bf16Copy& copy : bf16_copies_)
    if (copy.valid > 0 && overlaps(pointer, bytes, copy.source, copy.valid * sizeof(float)))
      copy.valid = 0;
  if (mirror_.source != nullptr &&
      overlaps(pointer, bytes, mirror_.source, mirror_.count * sizeof(float)))
    mirror_.stale = true;
  for (ReluMask& mask : relu_masks_)
    if (mask.valid && overlaps(pointer, bytes, mask.output,
                               size_t(mask.rows) * mask.columns * sizeof(cuda::bf16)))
      mask.valid = false;
}

CudaBackend::Bf16Copy* CudaBackend::copy_to_write(const float* out, size_t n) {
  wrote(out, n * sizeof(float));
  if (!bf16_ || !options_.fused_kernels) return nullptr;
  for (Bf16Copy& copy : bf16_copies_)
    if (copy.source == out && copy.capacity() >= n) {
      copy.valid = n;  // the caller's kernel writes it
      copy.fp32_written = true;
      return &copy;
    }
  return nullptr;
}

cuda::bf16* CudaBackend::bf16_output(const float* out, size_t n) {
  Bf16Copy* copy = copy_to_write(out, n);
  return copy ? copy->memory.as<cuda::bf16>() : nullptr;
}

cuda::bf16* CudaBackend::bf16_output(float*& out, size_t n, ReadBy read_by) {
  Bf16Copy* copy = copy_to_write(out, n);
  if (copy == nullptr) return nullptr;
  if (read_by == ReadBy::kNextProduct && copies_alone_) {
    copy->fp32_written = false;
    out = nullptr;  // the caller's kernel writes the copy alone
  }
  return copy->memory.as<cuda::bf16>();
}

bool CudaBackend::keeps_as_bf16(ProductOperand tensor, int /*head_size*/) const {
  return bf16_ && options_.fused_kernels && relu_output_in_bf16_ &&
         tensor == ProductOperand::kReluOutput;
}

void CudaBackend::store_as_bf16(const float* tensor, size_t count) {
  if (!keeps_as_bf16(ProductOperand::kReluOutput, 0))
    throw Error("internal: this cuda backend keeps no tensor as bf16");
  kept_bf16_.push_back({reinterpret_cast<const char*>(tensor), count * sizeof(cuda::bf16)});
}

cuda::bf16* CudaBackend::kept_in_bf16(const void* x, size_t n) const {
  const char* begin = static_cast<const char*>(x);
  const char* end = begin + n * sizeof(cuda::bf16);
  for (const KeptBf16& kept : kept_bf16_) {
    if (begin >= kept.begin && end <= kept.begin + kept.bytes)
      return reinterpret_cast<cuda::bf16*>(const_cast<char*>(begin));
    if (overlaps(begin, n * sizeof(cuda::bf16), kept.begin, kept.bytes))
      throw Error("internal: an op reads or writes part of a tensor kept as bf16 as fp32");
  }
  return nullptr;
}

// ReLU's masks (FOLIO_CUDA_RELU_BACKWARD=epilogue) go with kept ReLU outputs, and as copies do:
// not for generation's small products, nor while a step is recorded, and only so many.
CudaBackend::ReluMask* CudaBackend::relu_mask_to_write(const void* output, int rows, int columns) {
  if (!relu_mask_in_products_) return nullptr;
  for (ReluMask& mask : relu_masks_)
    if (mask.output == output && mask.rows == rows && mask.columns == columns) return &mask;
  if (size_t(rows) * columns < kSmallestKeptCopy || capturing_ ||
      relu_masks_.size() >= kMostKeptCopies)
    return nullptr;
  ReluMask mask;
  mask.output = output;
  mask.rows = rows;
  mask.columns = columns;
  mask.ld_bits = (int64_t(columns) + 127) / 128 * 128;
  mask.bits = DeviceMemory(size_t(mask.ld_bits / 8) * rows);
  relu_masks_.push_back(std::move(mask));
  return &relu_masks_.back();
}

const CudaBackend::ReluMask* CudaBackend::valid_relu_mask(const void* output, int rows,
                                                          int columns) const {
  for (const ReluMask& mask : relu_masks_)
    if (mask.valid && mask.output == output && mask.rows == rows && mask.columns == columns)
      return &mask;
  return nullptr;
}

const cuda::bf16* CudaBackend::bf16_alone(const float* x, size_t n) const {
  if (const cuda::bf16* kept = kept_in_bf16(x, n)) return kept;
  for (const Bf16Copy& copy : bf16_copies_) {
    if (copy.valid == 0 || copy.fp32_written) continue;
    if (copy.source == x && copy.valid >= n) return copy.memory.as<cuda::bf16>();
    if (overlaps(x, n * sizeof(float), copy.source, copy.valid * sizeof(float)))
      throw Error("internal: an op reads part of an output written as its bf16 copy alone");
  }
  return nullptr;
}

const float* CudaBackend::fp32_values(const float* x, size_t n, Scratch slot) {
  const cuda::bf16* alone = bf16_alone(x, n);
  if (alone == nullptr) return x;
  auto* widened = static_cast<float*>(scratch(slot, n * sizeof(float)));
  const unsigned blocks = std::min(cuda::blocks_for(n, cuda::kBlockThreads), 8u * sm_count_);
  widen_from_bf16_kernel<<<blocks, cuda::kBlockThreads, 0, stream_>>>(widened, alone, n);
  check_launch("widen_from_bf16");
  return widened;
}

const cuda::bf16* CudaBackend::bf16_activation(const float* x, size_t n, Scratch fallback) {
  // a tensor kept as bf16, or an output written as its copy alone: the bf16 values are all there is
  if (const cuda::bf16* alone = bf16_alone(x, n)) return alone;
  const bool keep = options_.fused_kernels && n >= kSmallestKeptCopy;
  for (Bf16Copy& copy : bf16_copies_) {
    if (copy.source != x) continue;
    if (copy.valid >= n) return copy.memory.as<cuda::bf16>();
    if (copy.capacity() < n) {
      if (capturing_ || !keep) break;
      copy.memory = DeviceMemory();
      copy.memory = DeviceMemory(n * sizeof(cuda::bf16));
    }
    convert_to_bf16(copy.memory.as<cuda::bf16>(), x, n);
    copy.valid = n;
    copy.fp32_written = true;
    return copy.memory.as<cuda::bf16>();
  }
  if (keep && !capturing_ && bf16_copies_.size() < kMostKeptCopies) {
    Bf16Copy& copy = bf16_copies_.emplace_back();
    copy.source = x;
    copy.memory = DeviceMemory(n * sizeof(cuda::bf16));
    convert_to_bf16(copy.memory.as<cuda::bf16>(), x, n);
    copy.valid = n;
    return copy.memory.as<cuda::bf16>();
  }
  auto* converted = static_cast<cuda::bf16*>(scratch(fallback, n * sizeof(cuda::bf16)));
  convert_to_bf16(converted, x, n);
  return converted;
}

void CudaBackend::set_parameter_buffer(const float* parameters, size_t count) {
  if (!bf16_) return;
  mirror_ = ParameterMirror{};
  mirror_.source = parameters;
  mirror_.count = count;
  mirror_.memory = DeviceMemory(count * sizeof(cuda::bf16));
  mirror_.stale = true;
}

void CudaBackend::refresh_parameter_mirror() {
  convert_to_bf16(mirror_.memory.as<cuda::bf16>(), mirror_.source, mirror_.count);
  mirror_.stale = false;
}

cuda::bf16* CudaBackend::mirror_of(const float* params, size_t n) {
  if (mirror_.source == nullptr || params < mirror_.source ||
      params + n > mirror_.source + mirror_.count)
    return nullptr;
  return mirror_.memory.as<cuda::bf16>() + (params - mirror_.source);
}

const cuda::bf16* CudaBackend::bf16_weight(const float* w, size_t n, Scratch fallback) {
  if (cuda::bf16* mirrored = mirror_of(w, n)) {
    if (mirror_.stale) refresh_parameter_mirror();
    return mirrored;
  }
  auto* converted = static_cast<cuda::bf16*>(scratch(fallback, n * sizeof(cuda::bf16)));
  convert_to_bf16(converted, w, n);
  return converted;
}

}  // namespace folio

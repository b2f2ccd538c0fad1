// Large CPU buffers on 2 MiB transparent huge pages. The activations and parameters
// (CpuBackend::allocate) and the backend's own bf16 operand copies live there: ops walk them in
// strides of a row (attention writes a head's 64 columns of every row, 4.5 KiB apart in
// shakespeare_char's qkv gradient), and on 4 KiB pages nearly every row is a TLB miss. This
// machine's kernel gives huge pages only where asked (transparent_hugepage=madvise).
#pragma once

#include <cstddef>
#include <cstdlib>

#if !defined(FOLIO_CPU_VARIANT)
#define FOLIO_CPU_VARIANT baseline
#endif

namespace folio::cpu {

// `bytes` (at least 1) aligned to 2 MiB and advised as huge pages when that large, else to 64
// bytes; an Error naming the size when memory runs out. Freed with std::free.
void* allocate_on_huge_pages(size_t bytes);

inline namespace FOLIO_CPU_VARIANT {  // compiled per kernel variant (see vector_math.h)

// A buffer of T that only grows; growing drops its contents.
template <typename T>
class HugePageBuffer {
 public:
  HugePageBuffer() = default;
  HugePageBuffer(const HugePageBuffer&) = delete;
  HugePageBuffer& operator=(const HugePageBuffer&) = delete;
  ~HugePageBuffer() { std::free(data_); }

  // At least n elements.
  T* reserve(size_t n) {
    if (n > size_) {
      std::free(data_);
      data_ = nullptr;
      size_ = 0;
      data_ = static_cast<T*>(allocate_on_huge_pages(n * sizeof(T)));
      size_ = n;
    }
    return data_;
  }
  T* data() const { return data_; }

 private:
  T* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace FOLIO_CPU_VARIANT
}  // namespace folio::cpu

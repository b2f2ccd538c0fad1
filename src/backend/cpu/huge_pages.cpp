#include "backend/cpu/huge_pages.h"

#include <sys/mman.h>

#include <algorithm>
#include <string>

#include "core/error.h"

namespace folio::cpu {

void* allocate_on_huge_pages(size_t bytes) {
  // Aligned to 2 MiB so that the kernel can back the whole buffer with huge pages: first touch
  // of a multi-GiB activation plan then costs a few thousand page faults instead of a million,
  // and the TLB covers the working set.
  constexpr size_t kHugePage = size_t(2) << 20;
  const size_t alignment = bytes >= kHugePage ? kHugePage : 64;
  const size_t rounded = (std::max<size_t>(bytes, 1) + alignment - 1) / alignment * alignment;
  void* pointer = std::aligned_alloc(alignment, rounded);
  if (pointer == nullptr)
    throw Error("out of memory allocating " + std::to_string(bytes >> 20) +
                " MiB: use a smaller model (n_layer, n_embd), batch_size or block_size");
  if (alignment == kHugePage) ::madvise(pointer, rounded, MADV_HUGEPAGE);
  return pointer;
}

}  // namespace folio::cpu

#include <cstring>

#include "dist/communicator.h"

namespace folio {

void LocalCommunicator::all_gather(const void* mine, void* all, size_t bytes) {
  if (mine != all) std::memmove(all, mine, bytes);
}

}  // namespace folio

#include "nabu/core/allocator.h"

#include <malloc.h>

namespace nabu {

void keep_freed_buffers_for_reuse() {
  // glibc caps the threshold at 32 MiB on 64-bit systems (a larger value is refused); buffers
  // above it are still mapped and unmapped per allocation.
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
}

}  // namespace nabu

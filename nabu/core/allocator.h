// How the process's C heap treats the large buffers tensors live in.
#pragma once

namespace nabu {

// glibc gives every allocation above its mmap threshold (128 KiB at first) back to the kernel on
// free, so each forward pass page-faults its buffers anew (a recurrent layer's [T, B, 4H] gates,
// 5 MiB in the demo recipe): in the bf16 CPU LSTM that took a fifth of the layer's time
// (docs/results.md, "Mixed precision on the CPU"). Raising the threshold to its maximum (32 MiB)
// and keeping freed memory in the heap makes a freed buffer the next one's. Allocates nothing;
// changes no result. Called once by the nabu program; an application embedding Nabu decides for
// itself.
void keep_freed_buffers_for_reuse();

}  // namespace nabu

// How the process's C allocator treats large blocks, set when the steps begin (train's fit and
// benchmark's timed loop): not at process start, so that what runs before (reading weights or
// refusing a hostile checkpoint) keeps glibc's defaults, whose freed blocks go back at once.
#pragma once

namespace gputrain {

// glibc's malloc maps a block above its mmap threshold with mmap and unmaps it on free, and
// hands free memory at the heap's top back to the kernel past its trim threshold. Both start low
// (128 KiB) and rise only as large blocks are freed, to at most 32 MiB and 64 MiB. A training
// step frees and allocates the same large tensors every step, so until then (and for tensors
// that moved the thresholds no further) each step's activations were fresh pages, zeroed by the
// kernel: 580,000 page faults in 60 steps of the small GPT on this project's 2-core machine
// (1.6 s of system time), 790,000 in the quickstart. This sets the thresholds its own rule ends
// at, 32 MiB and 64 MiB: 116,000 faults and 0.65 s for the GPT. Set from process start (the
// same values in the environment), the quickstart took 93,000 faults and peaked at 598 MiB of
// RSS against 578 (1 GiB thresholds kept more: 671). Blocks above 32 MiB are mapped and
// unmapped as before. Set earlier, a hostile checkpoint's refusal (the reader's buffers growing
// by doubling, each size kept) peaked 12 MiB over its start instead of 2. A user's
// MALLOC_MMAP_THRESHOLD_, MALLOC_TRIM_THRESHOLD_ or GLIBC_TUNABLES is kept; other C
// libraries: nothing is set.
void keep_freed_blocks();

}  // namespace gputrain

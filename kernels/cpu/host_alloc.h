// Host memory for the arrays that kernels stream through side by side (the
// backend's tensors, the AdamW benchmark's state).
//
// Why not plain aligned_alloc: large blocks come from mmap, so every one of
// them starts at the same offset within its page, and arrays of equal size
// are then spaced by a constant stride. Elements with the same index in two
// such arrays fall in the same L1 set. On AMD Zen cores the L1's way
// predictor also tags each line with a hash of linear-address bits 12-27 that
// XORs bit 12 with bit 27, so a stride of 2^27 + 2^12 (128 MiB arrays, as
// mmap places them) gives same-index lines the same tag too, and the arrays
// evict each other on every access: the bf16 AdamW step over four 128 MiB
// arrays ran at half its speed (and at full speed 2^27 + 2^13 apart) (BENCHMARKS.md, "AdamW step
// (CPU)"). Here each large block starts at its own offset within the page ("page colouring"), so no
// two of them share an L1 set at the same index.
#pragma once

#include <cstddef>

namespace srkit::cpu {

// Blocks of at least this many bytes are coloured; smaller ones sit in the
// caches anyway and are not worth the extra page.
constexpr size_t kColouredMinBytes = size_t(64) << 10;

// A zeroed, 64-byte aligned block of `bytes` bytes (0 is allowed), or nullptr
// when the host is out of memory. Free it with host_free only.
void* host_alloc(size_t bytes);
void host_free(void* p);  // nullptr is a no-op

}  // namespace srkit::cpu

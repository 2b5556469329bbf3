// The fused AdamW step on the CPU: one pass over a range of the flat parameter
// buffer that reads grads and optimizer state and writes weights and state, per
// the precision strategy's rule. The per-element math is kernels/common/adamw.h,
// shared with the CUDA step, so both store the same bits.
#pragma once

#include <cstddef>

#include "kernels/common/adamw.h"

namespace srkit::cpu {

// One pass over flat elements [begin, end). Every buffer is shard-local: element
// 0 of each array is global index `begin` (a ZeRO shard passes its own slices).
// SR bits use the global index. segs: sorted ranges contiguous from offset 0
// that cover at least [0, end), each saying whether weight decay applies.
// Telemetry (nullable) is summed over fixed 64K-element chunks of [begin, end)
// added in order, so it, like every stored bit, does not depend on the thread
// count; sums of squares are fp32 within 512-element tiles and fp64 beyond
// (~1e-6 relative). Throws std::invalid_argument on a malformed call
// (adamw_check_call).
void adamw_step(const AdamWRule& rule, const AdamWBuffers& buffers, const ParamSegment* segs,
                size_t nseg, size_t begin, size_t end, const AdamWHyper& hyper,
                AdamWTelemetry* telemetry);

}  // namespace srkit::cpu

// The fused AdamW step on a CUDA device: the same per-element math as the CPU
// step (kernels/common/adamw.h), so both store the same bits for every
// strategy. Callable from plain C++ (no CUDA headers).
#pragma once

#include <cstddef>

#include "kernels/common/adamw.h"
#include "kernels/cuda/stream.h"

namespace srkit::cuda {

// One pass over flat elements [begin, end) on the current device, queued on
// `stream` (nullptr: the default stream). buffers are
// device pointers, shard-local (element 0 of each array is global index
// `begin`); segs live on the host (sorted, contiguous from 0, covering
// [0, end)). SR bits use the global index. Telemetry (nullable) comes back to
// the host: counts equal the CPU step's exactly; the fp64 sums are reduced in a
// fixed order (deterministic run to run) that differs from the CPU's, so they
// agree with it to rounding only (the call then waits for the stream). Without
// telemetry it does not wait for the kernel. Throws std::invalid_argument on a malformed call,
// std::runtime_error on a CUDA error.
void adamw_step(const AdamWRule& rule, const AdamWBuffers& buffers, const ParamSegment* segs,
                size_t nseg, size_t begin, size_t end, const AdamWHyper& hyper,
                AdamWTelemetry* telemetry, Stream stream);

}  // namespace srkit::cuda

// The fused AdamW step on a CUDA device (kernels/cuda/adamw.cu): the same
// per-element math as the CPU step (kernels/common/adamw.h), so both store the
// same bits for every strategy. Callable from plain C++ (no CUDA headers).
//
// Stream-ordered and allocation-free: what a step needs beyond its arrays (the
// equal-decay runs of the segments and the telemetry partial sums) lives in a
// plan block the caller allocates once per optimizer range (adamw_plan_bytes)
// and fills once by copying adamw_plan_image to it. The step reads the runs
// from it and writes its telemetry partial sums into it, so one plan serves
// one stream at a time.
#pragma once

#include <cstddef>
#include <vector>

#include "kernels/common/adamw.h"
#include "kernels/common/step_record.h"
#include "kernels/cuda/stream.h"

namespace srkit::cuda {

// Device bytes of the plan of range [begin, end) of segments segs (sorted,
// contiguous from 0, covering [0, end): adamw_check_segments; else
// std::invalid_argument).
size_t adamw_plan_bytes(const ParamSegment* segs, size_t nseg, size_t begin, size_t end);
// The plan's initial contents (adamw_plan_bytes bytes), to copy to the device once.
std::vector<unsigned char> adamw_plan_image(const ParamSegment* segs, size_t nseg, size_t begin,
                                            size_t end);

// One pass over flat elements [begin, end), queued on `stream`. buffers are
// device pointers, shard-local (element 0 of each array is global index
// `begin`); SR bits use the global index. plan: the device plan of this range
// (read and written by the step; may be null only when begin == end).
// clip (device, nullable): when given, clip->scale replaces hyper.grad_scale,
// and the kernel changes nothing when !clip->ok. telemetry (device, nullable):
// overwritten with this call's sums (zeros when !clip->ok); counts equal the
// CPU step's exactly, the fp64 sums are reduced in a fixed order of their own.
// Never waits for the device. Throws std::invalid_argument on a malformed call,
// std::runtime_error on a CUDA error.
void adamw_step(const AdamWRule& rule, const AdamWBuffers& buffers, void* plan, size_t begin,
                size_t end, const AdamWHyper& hyper, const GradClip* clip,
                AdamWTelemetry* telemetry, Stream stream);

}  // namespace srkit::cuda

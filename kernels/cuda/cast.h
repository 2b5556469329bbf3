// Array casts between fp32 and bf16 on the GPU, callable from plain C++. Same
// per-element rules (kernels/common/bf16.h) and random-bits contract
// (kernels/common/sr_bits.h) as kernels/cpu/cast.h, so results equal the CPU
// kernels' bit for bit. All pointers are device pointers. Kernels run on
// `stream` (nullptr: the default stream), asynchronously to the host (a copy
// back or a synchronise waits); launch errors throw std::runtime_error.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/common/bf16.h"
#include "kernels/common/sr_bits.h"
#include "kernels/cuda/stream.h"

namespace srkit::cuda {

void cast_f32_to_bf16_rn(const float* in, bf16* out, size_t n, Stream stream);

// base_index: the global element index of in[0], as in cpu::cast_f32_to_bf16_sr.
void cast_f32_to_bf16_sr(const float* in, bf16* out, size_t n, uint64_t seed, RngPurpose purpose,
                         uint64_t step, uint64_t base_index, Stream stream);

void cast_bf16_to_f32(const bf16* in, float* out, size_t n, Stream stream);

}  // namespace srkit::cuda

// Array casts between fp32 and bf16 (and fp16 -> fp32) on the CPU (OpenMP,
// AVX2). Every element goes through the per-element rules of
// kernels/common/bf16.h and fp_formats.h; SR bits follow
// the random-bits contract (kernels/common/sr_bits.h), so results depend on
// neither the thread count nor how the array is split. Input and output must
// not overlap (the threads read ahead of each other's writes). The SR bits come
// 256 elements at a time from kernels/cpu/philox_simd.h.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/common/bf16.h"
#include "kernels/common/fp_formats.h"
#include "kernels/common/sr_bits.h"

namespace srkit::cpu {

void cast_f32_to_bf16_rn(const float* in, bf16* out, size_t n);

// base_index: the global element index of in[0] (its offset in the flat buffer),
// so a shard of a larger array draws the same bits as the whole array would.
void cast_f32_to_bf16_sr(const float* in, bf16* out, size_t n, uint64_t seed, RngPurpose purpose,
                         uint64_t step, uint64_t base_index);

void cast_bf16_to_f32(const bf16* in, float* out, size_t n);

// IEEE half -> fp32 (exact: every fp16 value, subnormals included, is a float).
void cast_f16_to_f32(const fp16* in, float* out, size_t n);

}  // namespace srkit::cpu

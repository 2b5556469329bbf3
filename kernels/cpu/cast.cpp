#include "kernels/cpu/cast.h"

#include "kernels/common/sr_bits.h"

namespace srkit::cpu {

void cast_f32_to_bf16_rn(const float* in, bf16* out, size_t n) {
#pragma omp parallel for simd schedule(static)
  for (size_t i = 0; i < n; ++i) out[i] = float_to_bf16_rn(in[i]);
}

void cast_bf16_to_f32(const bf16* in, float* out, size_t n) {
#pragma omp parallel for simd schedule(static)
  for (size_t i = 0; i < n; ++i) out[i] = bf16_to_float(in[i]);
}

void cast_f32_to_bf16_sr(const float* in, bf16* out, size_t n, uint64_t seed, uint32_t purpose,
                         uint64_t step, uint64_t base_index) {
#pragma omp parallel for schedule(static)
  for (size_t i = 0; i < n; ++i) {
    out[i] = float_to_bf16_sr(in[i], sr_bits16(seed, purpose, step, base_index + i));
  }
}

}  // namespace srkit::cpu

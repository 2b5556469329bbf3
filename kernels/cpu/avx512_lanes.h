// Lane-level helpers shared by the AVX-512 kernels (kernels/cpu/philox_simd.cpp,
// kernels/cpu/gemm_bf16_dot.cpp). Compiled for AVX-512 F alone, a subset of every
// AVX-512 target of kernels/cpu/isa_target.h, and always inlined into those
// kernels: a helper, not a call.
#pragma once

#include <immintrin.h>

namespace srkit::cpu {

// The 4 x 4 matrix of 128-bit lanes of in[0..3] transposed: lane i of out[q]
// is lane q of in[i]. Two rounds of lane shuffles.
__attribute__((target("avx512f"), always_inline)) inline void transpose_lanes4(const __m512i in[4],
                                                                               __m512i out[4]) {
  const __m512i even01 = _mm512_shuffle_i32x4(in[0], in[1], _MM_SHUFFLE(2, 0, 2, 0));
  const __m512i even23 = _mm512_shuffle_i32x4(in[2], in[3], _MM_SHUFFLE(2, 0, 2, 0));
  const __m512i odd01 = _mm512_shuffle_i32x4(in[0], in[1], _MM_SHUFFLE(3, 1, 3, 1));
  const __m512i odd23 = _mm512_shuffle_i32x4(in[2], in[3], _MM_SHUFFLE(3, 1, 3, 1));
  out[0] = _mm512_shuffle_i32x4(even01, even23, _MM_SHUFFLE(2, 0, 2, 0));
  out[1] = _mm512_shuffle_i32x4(odd01, odd23, _MM_SHUFFLE(2, 0, 2, 0));
  out[2] = _mm512_shuffle_i32x4(even01, even23, _MM_SHUFFLE(3, 1, 3, 1));
  out[3] = _mm512_shuffle_i32x4(odd01, odd23, _MM_SHUFFLE(3, 1, 3, 1));
}

}  // namespace srkit::cpu

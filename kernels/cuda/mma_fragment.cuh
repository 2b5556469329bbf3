// Warp-level bf16 matrix fragments for the tensor-core shape m16n8k16 with fp32
// accumulation: D (16x8) = A (16x16) * B (16x8) + C. On a GPU (sm_80, sm_90)
// the loads are ldmatrix and the product is mma.sync; in the CPU emulation
// (SRKIT_CUDA_EMU, docs/cuda-emulation.md) the same lane-to-element layout is
// implemented in plain C++: loads read shared memory element by element, and
// the product gathers the operands of the other lanes through warp shuffles.
//
// The layout (PTX ISA, "Matrix Fragments for mma.m16n8k16"), with g = lane / 4
// and t = lane % 4, element e of a fragment in register e / 2, low half first:
//   A: a_row(lane, e) = g + 8 * ((e / 2) % 2), a_col(lane, e) = 2t + e % 2 + 8 * (e / 4)
//   B: b_row(lane, e) = 2t + e % 2 + 8 * (e / 2), b_col(lane, e) = g        (row = k)
//   C: c_row(lane, e) = g + 8 * (e / 2),         c_col(lane, e) = 2t + e % 2
// Fragments are full-warp: every lane of the warp calls every function here the
// same number of times (warp.cuh's rules), and shared-memory addresses passed to
// the loads are 16-byte aligned per row (ldmatrix reads 16-byte rows).
//
// Numerics: products of bf16 are exact in fp32; the emulation adds them to C in
// k order 0..15 in fp32, while a tensor core adds them in an order (and with an
// internal precision) NVIDIA does not specify: results agree to fp32 rounding,
// not bit for bit (docs/architecture.md, "The CUDA backend").
#pragma once

#include <cstdint>

#include "kernels/common/bf16.h"
#include "kernels/cuda/compat.cuh"
#include "kernels/cuda/warp.cuh"

namespace srkit::cuda::mma {

// A tile of 16x16 bf16 (4 registers of two bf16), of 16x8 bf16 (k x n, 2
// registers), and a 16x8 fp32 accumulator.
struct FragA {
  uint32_t r[4];
};
struct FragB {
  uint32_t r[2];
};
struct FragC {
  float x[4];
};

__host__ __device__ constexpr int a_row(int lane, int e) { return lane / 4 + 8 * ((e / 2) % 2); }
__host__ __device__ constexpr int a_col(int lane, int e) {
  return 2 * (lane % 4) + e % 2 + 8 * (e / 4);
}
__host__ __device__ constexpr int b_row(int lane, int e) {
  return 2 * (lane % 4) + e % 2 + 8 * (e / 2);
}
__host__ __device__ constexpr int b_col(int lane, int /*e*/) { return lane / 4; }
__host__ __device__ constexpr int c_row(int lane, int e) { return lane / 4 + 8 * (e / 2); }
__host__ __device__ constexpr int c_col(int lane, int e) { return 2 * (lane % 4) + e % 2; }

// Two bf16 bit patterns in one register, `lo` in the low half (as mma reads them).
__device__ __forceinline__ uint32_t pack2(uint16_t lo, uint16_t hi) {
  return uint32_t(lo) | (uint32_t(hi) << 16);
}
__device__ __forceinline__ uint16_t half_of(uint32_t reg, int e) {
  return uint16_t(e % 2 == 0 ? reg & 0xffffu : reg >> 16);
}

__device__ __forceinline__ void zero(FragC& c) {
  for (float& v : c.x) v = 0.0f;
}

#if !defined(SRKIT_CUDA_EMU)
__device__ __forceinline__ uint32_t shared_address(const void* p) {
  return uint32_t(__cvta_generic_to_shared(p));
}
#endif

// A[r][k] = s[r * ld + k] (A row-major in shared memory; ld in elements, a
// multiple of 8).
__device__ __forceinline__ void load_a(FragA& a, const uint16_t* s, int ld) {
  const int lane = lane_id();
#if defined(SRKIT_CUDA_EMU)
  for (int e = 0; e < 8; e += 2)
    a.r[e / 2] = pack2(s[a_row(lane, e) * ld + a_col(lane, e)],
                       s[a_row(lane, e + 1) * ld + a_col(lane, e + 1)]);
#else
  // Lane l addresses row l % 16 at column 8 * (l / 16): matrices 0..3 are
  // (rows 0-7, cols 0-7), (8-15, 0-7), (0-7, 8-15), (8-15, 8-15) = registers 0..3.
  const uint32_t p = shared_address(s + (lane % 16) * ld + 8 * (lane / 16));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(a.r[0]), "=r"(a.r[1]), "=r"(a.r[2]), "=r"(a.r[3])
               : "r"(p));
#endif
}

// A[r][k] = s[k * ld + r] (A stored transposed, e.g. the transpose of a tile
// kept row-major).
__device__ __forceinline__ void load_a_trans(FragA& a, const uint16_t* s, int ld) {
  const int lane = lane_id();
#if defined(SRKIT_CUDA_EMU)
  for (int e = 0; e < 8; e += 2)
    a.r[e / 2] = pack2(s[a_col(lane, e) * ld + a_row(lane, e)],
                       s[a_col(lane, e + 1) * ld + a_row(lane, e + 1)]);
#else
  // Matrix m = l / 8 covers A rows 8 * (m % 2) and k 8 * (m / 2): its stored
  // rows are k, so lane l addresses stored row 8 * (m / 2) + l % 8.
  const int m = lane / 8;
  const uint32_t p = shared_address(s + (8 * (m / 2) + lane % 8) * ld + 8 * (m % 2));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(a.r[0]), "=r"(a.r[1]), "=r"(a.r[2]), "=r"(a.r[3])
               : "r"(p));
#endif
}

// B[k][n] = s[n * ld + k] (B stored as its transpose, row-major: e.g. K[key][d]
// for Q K^T).
__device__ __forceinline__ void load_b(FragB& b, const uint16_t* s, int ld) {
  const int lane = lane_id();
#if defined(SRKIT_CUDA_EMU)
  for (int e = 0; e < 4; e += 2)
    b.r[e / 2] = pack2(s[b_col(lane, e) * ld + b_row(lane, e)],
                       s[b_col(lane, e + 1) * ld + b_row(lane, e + 1)]);
#else
  // Lanes 0-15 address rows n = l % 8 at k = 8 * (l / 8); lanes 16-31 repeat
  // them (ldmatrix .x2 ignores their addresses, which must still be valid).
  const int l = lane % 16;
  const uint32_t p = shared_address(s + (l % 8) * ld + 8 * (l / 8));
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0,%1}, [%2];\n"
               : "=r"(b.r[0]), "=r"(b.r[1])
               : "r"(p));
#endif
}

// B[k][n] = s[k * ld + n] (B row-major: e.g. V[key][d] for P V).
__device__ __forceinline__ void load_b_trans(FragB& b, const uint16_t* s, int ld) {
  const int lane = lane_id();
#if defined(SRKIT_CUDA_EMU)
  for (int e = 0; e < 4; e += 2)
    b.r[e / 2] = pack2(s[b_row(lane, e) * ld + b_col(lane, e)],
                       s[b_row(lane, e + 1) * ld + b_col(lane, e + 1)]);
#else
  // Stored rows are k: lane l addresses row l % 16 (matrix l / 8 is k 8 * (l / 8)).
  const uint32_t p = shared_address(s + (lane % 16) * ld);
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0,%1}, [%2];\n"
               : "=r"(b.r[0]), "=r"(b.r[1])
               : "r"(p));
#endif
}

// The A fragment (16x16, bf16 rounded to nearest even) of the 16x16 matrix
// whose columns 0-7 are accumulator `lo` and 8-15 accumulator `hi`: the C
// layout of two n-tiles is the A layout of one k16 tile, so no data moves
// between lanes (how P = softmax(S) feeds P V).
__device__ __forceinline__ FragA a_from_c(const FragC& lo, const FragC& hi) {
  FragA a;
  a.r[0] = pack2(float_to_bf16_rn(lo.x[0]).bits, float_to_bf16_rn(lo.x[1]).bits);
  a.r[1] = pack2(float_to_bf16_rn(lo.x[2]).bits, float_to_bf16_rn(lo.x[3]).bits);
  a.r[2] = pack2(float_to_bf16_rn(hi.x[0]).bits, float_to_bf16_rn(hi.x[1]).bits);
  a.r[3] = pack2(float_to_bf16_rn(hi.x[2]).bits, float_to_bf16_rn(hi.x[3]).bits);
  return a;
}

// D = A * B + C (d may alias c).
__device__ __forceinline__ void mma(FragC& d, const FragA& a, const FragB& b, const FragC& c) {
#if defined(SRKIT_CUDA_EMU)
  // Lane (g, t) needs rows g and g + 8 of A, held by lanes 4g + j, and columns
  // 2t and 2t + 1 of B, held by lanes 4 * (2t) + j and 4 * (2t + 1) + j
  // (j = 0..3): every lane gathers them with shuffles, the same count on every
  // lane (a shuffle is a block-wide barrier in the emulation).
  const int lane = lane_id(), g = lane / 4, t = lane % 4;
  const uint64_t a01 = uint64_t(a.r[0]) | (uint64_t(a.r[1]) << 32);
  const uint64_t a23 = uint64_t(a.r[2]) | (uint64_t(a.r[3]) << 32);
  const uint64_t b01 = uint64_t(b.r[0]) | (uint64_t(b.r[1]) << 32);
  float arow[2][16], bcol[2][16];
  for (int j = 0; j < 4; ++j) {
    const uint64_t x01 = warp_shfl(a01, 4 * g + j), x23 = warp_shfl(a23, 4 * g + j);
    const uint64_t y0 = warp_shfl(b01, 4 * (2 * t) + j), y1 = warp_shfl(b01, 4 * (2 * t + 1) + j);
    const uint32_t ra[4] = {uint32_t(x01), uint32_t(x01 >> 32), uint32_t(x23), uint32_t(x23 >> 32)};
    const uint32_t rb[2][2] = {{uint32_t(y0), uint32_t(y0 >> 32)},
                               {uint32_t(y1), uint32_t(y1 >> 32)}};
    // Source lane 4g + j holds A elements e at (a_row, a_col(4g + j, e)).
    for (int e = 0; e < 8; ++e)
      arow[(e / 2) % 2][a_col(j, e)] = bf16_to_float(bf16{half_of(ra[e / 2], e)});
    for (int n = 0; n < 2; ++n)
      for (int e = 0; e < 4; ++e)
        bcol[n][b_row(j, e)] = bf16_to_float(bf16{half_of(rb[n][e / 2], e)});
  }
  for (int e = 0; e < 4; ++e) {
    float acc = c.x[e];
    const float* ar = arow[e / 2];
    const float* bc = bcol[e % 2];
    for (int k = 0; k < 16; ++k) acc += ar[k] * bc[k];
    d.x[e] = acc;
  }
#else
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%10,%11,%12,%13};\n"
      : "=f"(d.x[0]), "=f"(d.x[1]), "=f"(d.x[2]), "=f"(d.x[3])
      : "r"(a.r[0]), "r"(a.r[1]), "r"(a.r[2]), "r"(a.r[3]), "r"(b.r[0]), "r"(b.r[1]), "f"(c.x[0]),
        "f"(c.x[1]), "f"(c.x[2]), "f"(c.x[3]));
#endif
}

// D[r][n] -> p[r * ld + n] for the 16x8 tile (shared or global memory).
__device__ __forceinline__ void store_c(float* p, int ld, const FragC& c) {
  const int lane = lane_id();
  for (int e = 0; e < 4; ++e) p[c_row(lane, e) * ld + c_col(lane, e)] = c.x[e];
}

}  // namespace srkit::cuda::mma

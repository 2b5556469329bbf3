// Element access shared by the CUDA kernels of the model ops (pointwise,
// encoder, layernorm, loss, reduce): fp32 or bf16 storage read as fp32 and
// written with one round-to-nearest-even (as kernels/cpu/elements.h's to_f32 and
// from_f32), 8-element chunks moved with 128-bit loads and stores, and the
// host-side helpers every launcher uses (dtype dispatch, shape checks).
//
// Chunks: a kernel that walks a row or an array in 8-element chunks loads a
// chunk with one (bf16) or two (fp32) 128-bit accesses when the pointer is
// 16-byte aligned, and element by element otherwise. Both paths hand the same
// values to the same arithmetic in the same order, so results never depend on
// the alignment of a buffer (reductions included: a lane owns the same chunks
// either way).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>

#include "kernels/common/bf16.h"
#include "kernels/common/dtype.h"
#include "kernels/common/dtype_dispatch.h"
#include "kernels/cuda/compat.cuh"

namespace srkit::cuda {

inline constexpr int kChunk = 8;  // elements per chunk: 16 bytes of bf16, 32 of fp32

// ---- single elements ---------------------------------------------------------
__device__ __forceinline__ float widen(float x) { return x; }
__device__ __forceinline__ float widen(bf16 x) { return bf16_to_float(x); }
template <typename T>
__device__ __forceinline__ float load_f32(const T* p) {
  return widen(*p);
}

template <typename T>
__device__ __forceinline__ T from_f32(float x);
template <>
__device__ __forceinline__ float from_f32<float>(float x) {
  return x;
}
template <>
__device__ __forceinline__ bf16 from_f32<bf16>(float x) {
  return float_to_bf16_rn(x);
}

template <typename T>
__device__ __forceinline__ void store_f32(T* p, float x) {
  *p = from_f32<T>(x);
}

// What a gradient store adds its contribution to (GradWrite): the stored
// value, or 0 (the CPU ops' grad_base).
template <typename T>
__device__ __forceinline__ float grad_base(const T& stored, bool accumulate) {
  return accumulate ? widen(stored) : 0.0f;
}

// Elements of the chunk starting at i0 that lie below n (at most 8).
__device__ __forceinline__ int chunk_len(size_t n, size_t i0) {
  return n - i0 < size_t(kChunk) ? int(n - i0) : kChunk;
}

// ---- 128-bit accesses ----------------------------------------------------------
struct alignas(16) Raw16 {
  uint32_t w[4];
};

// p: 16-byte aligned.
__device__ __forceinline__ Raw16 load16(const void* p) {
#if defined(SRKIT_CUDA_EMU)
  Raw16 r;
  std::memcpy(&r, p, sizeof r);
  return r;
#else
  const uint4 v = *reinterpret_cast<const uint4*>(p);  // one ld.global.v4
  return Raw16{{v.x, v.y, v.z, v.w}};
#endif
}

__device__ __forceinline__ void store16(void* p, const Raw16& r) {
#if defined(SRKIT_CUDA_EMU)
  std::memcpy(p, &r, sizeof r);
#else
  *reinterpret_cast<uint4*>(p) = make_uint4(r.w[0], r.w[1], r.w[2], r.w[3]);
#endif
}

// ---- 8 elements as stored ----------------------------------------------------
// 16 bytes as elements of T, and back (little-endian: element 0 is the low
// bits of word 0). For kernels that keep a chunk in its stored type (AdamW's
// state, the SR cast's output).
__device__ __forceinline__ void unpack16(const Raw16& r, float* x) {
  for (int k = 0; k < 4; ++k) x[k] = bits_as_float(r.w[k]);
}
__device__ __forceinline__ void unpack16(const Raw16& r, bf16* x) {
  for (int k = 0; k < 4; ++k) {
    x[2 * k].bits = uint16_t(r.w[k]);
    x[2 * k + 1].bits = uint16_t(r.w[k] >> 16);
  }
}
__device__ __forceinline__ void unpack16(const Raw16& r, int16_t* x) {
  for (int k = 0; k < 4; ++k) {
    x[2 * k] = int16_t(uint16_t(r.w[k]));
    x[2 * k + 1] = int16_t(uint16_t(r.w[k] >> 16));
  }
}
__device__ __forceinline__ Raw16 pack16(const float* x) {
  Raw16 r;
  for (int k = 0; k < 4; ++k) r.w[k] = float_as_bits(x[k]);
  return r;
}
__device__ __forceinline__ uint32_t pack_halves(uint16_t lo, uint16_t hi) {
  return uint32_t(lo) | (uint32_t(hi) << 16);
}
__device__ __forceinline__ Raw16 pack16(const bf16* x) {
  Raw16 r;
  for (int k = 0; k < 4; ++k) r.w[k] = pack_halves(x[2 * k].bits, x[2 * k + 1].bits);
  return r;
}
__device__ __forceinline__ Raw16 pack16(const int16_t* x) {
  Raw16 r;
  for (int k = 0; k < 4; ++k) r.w[k] = pack_halves(uint16_t(x[2 * k]), uint16_t(x[2 * k + 1]));
  return r;
}

// The 8 elements at p (2- or 4-byte T: one or two 128-bit accesses); p 16-byte aligned.
template <typename T>
__device__ __forceinline__ void load8_raw(const T* p, T (&x)[kChunk]) {
  static_assert(sizeof(T) == 2 || sizeof(T) == 4, "load8_raw: 2- or 4-byte elements");
  constexpr int kPer16 = int(16 / sizeof(T));
  for (int h = 0; h < kChunk / kPer16; ++h) unpack16(load16(p + kPer16 * h), x + kPer16 * h);
}
template <typename T>
__device__ __forceinline__ void store8_raw(T* p, const T (&x)[kChunk]) {
  static_assert(sizeof(T) == 2 || sizeof(T) == 4, "store8_raw: 2- or 4-byte elements");
  constexpr int kPer16 = int(16 / sizeof(T));
  for (int h = 0; h < kChunk / kPer16; ++h) store16(p + kPer16 * h, pack16(x + kPer16 * h));
}

// ---- 8 elements kept as loaded, widened when used ---------------------------
// A chunk's 16-byte words (1 for bf16, 2 for fp32), so that a kernel can have
// several chunks' loads in flight in few registers before it adds them.
template <typename T>
struct RawChunk {
  static constexpr int kWords = int(sizeof(T)) / 2;
  Raw16 w[kWords];
};

// The 8 elements at p; p 16-byte aligned.
template <typename T>
__device__ __forceinline__ RawChunk<T> load_raw_chunk(const T* p) {
  RawChunk<T> c;
  for (int h = 0; h < RawChunk<T>::kWords; ++h) c.w[h] = load16(p + 8 / RawChunk<T>::kWords * h);
  return c;
}

// The n <= 8 elements at p, element by element (any alignment); words past n are 0.
__device__ __forceinline__ RawChunk<float> load_raw_chunk(const float* p, int n) {
  RawChunk<float> c;
  for (int k = 0; k < kChunk; ++k) c.w[k / 4].w[k % 4] = k < n ? float_as_bits(p[k]) : 0u;
  return c;
}
__device__ __forceinline__ RawChunk<bf16> load_raw_chunk(const bf16* p, int n) {
  RawChunk<bf16> c;
  for (int k = 0; k < 4; ++k) {
    c.w[0].w[k] = pack_halves(2 * k < n ? p[2 * k].bits : uint16_t(0),
                              2 * k + 1 < n ? p[2 * k + 1].bits : uint16_t(0));
  }
  return c;
}

__device__ __forceinline__ void widen_chunk(const RawChunk<float>& c, float (&x)[kChunk]) {
  for (int k = 0; k < kChunk; ++k) x[k] = bits_as_float(c.w[k / 4].w[k % 4]);
}
__device__ __forceinline__ void widen_chunk(const RawChunk<bf16>& c, float (&x)[kChunk]) {
  for (int k = 0; k < 4; ++k) {  // little-endian: element 2k is the low half of word k
    x[2 * k] = bits_as_float(c.w[0].w[k] << 16);
    x[2 * k + 1] = bits_as_float(c.w[0].w[k] & 0xffff0000u);
  }
}

// acc[k] += element k of the chunks at row(0), row(1), ..., row(n - 1), in
// that order (the sums of a column over rows), keeping kRowsInFlight rows'
// loads in flight before adding them. kVec: each row(i) is 16-byte aligned and
// holds 8 elements; else the len <= 8 elements of each load one by one. The
// order of the additions, hence the bits, does not depend on kVec or
// kRowsInFlight.
template <int kRowsInFlight, bool kVec, typename T, typename RowAt>
__device__ __forceinline__ void add_rows(RowAt row, int n, int len, float (&acc)[kChunk]) {
  for (int i = 0; i < n; i += kRowsInFlight) {
    RawChunk<T> raw[kRowsInFlight];
    for (int b = 0; b < kRowsInFlight; ++b) {
      if (i + b < n) {
        const T* p = row(i + b);
        raw[b] = kVec ? load_raw_chunk(p) : load_raw_chunk(p, len);
      }
    }
    for (int b = 0; b < kRowsInFlight; ++b) {
      if (i + b < n) {
        float x[kChunk];
        widen_chunk(raw[b], x);
        for (int k = 0; k < kChunk; ++k) acc[k] += x[k];
      }
    }
  }
}

// Elements [0, 8) of p as floats; p 16-byte aligned.
template <typename T>
__device__ __forceinline__ void load8_aligned(const T* p, float (&x)[kChunk]) {
  widen_chunk(load_raw_chunk(p), x);
}

// Rounds x[0, 8) to T and stores them at p; p 16-byte aligned.
__device__ __forceinline__ void store8_aligned(float* p, const float (&x)[kChunk]) {
  for (int h = 0; h < 2; ++h) {
    Raw16 r;
    for (int k = 0; k < 4; ++k) r.w[k] = float_as_bits(x[4 * h + k]);
    store16(p + 4 * h, r);
  }
}
__device__ __forceinline__ void store8_aligned(bf16* p, const float (&x)[kChunk]) {
  Raw16 r;
  for (int k = 0; k < 4; ++k) {
    r.w[k] = uint32_t(float_to_bf16_rn(x[2 * k]).bits) |
             (uint32_t(float_to_bf16_rn(x[2 * k + 1]).bits) << 16);
  }
  store16(p, r);
}

// The n <= 8 elements at p (elements past n read as 0): one 128-bit path when
// kVec (the caller guarantees alignment and n == 8), else element by element.
template <bool kVec, typename T>
__device__ __forceinline__ void load_chunk(const T* p, int n, float (&x)[kChunk]) {
  if (kVec) {
    load8_aligned(p, x);
  } else {
    for (int k = 0; k < kChunk; ++k) x[k] = k < n ? load_f32(p + k) : 0.0f;
  }
}

template <bool kVec, typename T>
__device__ __forceinline__ void store_chunk(T* p, int n, const float (&x)[kChunk]) {
  if (kVec) {
    store8_aligned(p, x);
  } else {
    for (int k = 0; k < kChunk && k < n; ++k) store_f32(p + k, x[k]);
  }
}

// ---- host helpers --------------------------------------------------------------
inline bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

// Throws std::invalid_argument "<op>: bad shape A=.. B=.. (expected ...)" unless ok.
inline void check_shape(bool ok, const char* op, const std::string& shape, const char* expected) {
  if (!ok) {
    throw std::invalid_argument(std::string(op) + ": bad shape " + shape + " (expected " +
                                expected + ")");
  }
}

}  // namespace srkit::cuda

// Element-wise ops and the gather (kernels/cuda/pointwise.h). Every output
// element is one call of the CPU op's element expression
// (kernels/cpu/pointwise.cpp) rounded once, so the bits
// equal the CPU backend's.
//
// Shape: grid-stride loops over 8-element chunks, 256 threads a block and at
// most kGridStrideMaxBlocks blocks (enough to fill 132 SMs several times over, few
// enough that each thread loops a while). A chunk moves as 128-bit accesses
// when every pointer is 16-byte aligned, element by element otherwise (and in
// the tail), so loads and stores of a warp are coalesced either way.
#include <algorithm>
#include <type_traits>

#include "kernels/common/math.h"
#include "kernels/cuda/elements.cuh"
#include "kernels/cuda/gelu_fast.cuh"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/pointwise.h"

namespace srkit::cuda {
namespace {

// ---- element maps: out[i] = op(a[i], b[i], out[i]) ------------------------------
// An op says which operands it reads (kReadsB, kReadsOut); out[i] is read only
// when the op needs it (an accumulated gradient).
// bf16 storage tries the approximate GELU first (kernels/cuda/gelu_fast.cuh):
// the try is kept only when it rounds to the exact expression's bf16.
template <typename T>
struct GeluForward {
  static constexpr bool kReadsB = false, kReadsOut = false;
  __device__ float operator()(float x, float, float) const {
    if constexpr (std::is_same_v<T, bf16>) {
      float y;
      if (gelu_fast(x, kGeluFastMargin, y)) return y;
    }
    return gelu(x);
  }
};
struct Residual {
  static constexpr bool kReadsB = true, kReadsOut = false;
  __device__ float operator()(float a, float b, float) const { return a + b; }
};
// dinp = base + gelu'(inp) * dout, base = the old dinp (kAccumulate) or 0, as
// kernels/cpu/pointwise.cpp (0.0f + d, like the CPU: -0 becomes +0).
template <typename T, bool kAccumulate>
struct GeluBackward {
  static constexpr bool kReadsB = true, kReadsOut = kAccumulate;
  __device__ float operator()(float x, float dout, float old) const {
    const float base = kAccumulate ? old : 0.0f;
    if constexpr (std::is_same_v<T, bf16>) {
      float out;
      if (gelu_backward_fast(x, dout, base, kGeluFastMargin, out)) return out;
    }
    const float d = gelu_grad(x) * dout;
    return base + d;
  }
};

template <typename T, typename Op, bool kVec>
__global__ void map_kernel(T* out, const T* a, const T* b, size_t n, Op op) {
  const size_t chunks = (n + kChunk - 1) / kChunk;
  for (size_t c = grid_thread_index(); c < chunks; c += grid_thread_count()) {
    const size_t i0 = c * kChunk;
    const int len = chunk_len(n, i0);
    float xa[kChunk], xb[kChunk] = {}, xo[kChunk] = {};
    if (kVec && len == kChunk) {
      load_chunk<true>(a + i0, len, xa);
      if (Op::kReadsB) load_chunk<true>(b + i0, len, xb);
      if (Op::kReadsOut) load_chunk<true>(out + i0, len, xo);
      for (int k = 0; k < kChunk; ++k) xo[k] = op(xa[k], xb[k], xo[k]);
      store_chunk<true>(out + i0, len, xo);
    } else {
      load_chunk<false>(a + i0, len, xa);
      if (Op::kReadsB) load_chunk<false>(b + i0, len, xb);
      if (Op::kReadsOut) load_chunk<false>(out + i0, len, xo);
      for (int k = 0; k < kChunk; ++k) xo[k] = op(xa[k], xb[k], xo[k]);
      store_chunk<false>(out + i0, len, xo);
    }
  }
}

template <typename T, typename Op>
void map(const char* name, void* out, const void* a, const void* b, size_t n, Op op,
         Stream stream) {
  if (n == 0) return;
  const bool vec = aligned16(out) && aligned16(a) && (!Op::kReadsB || aligned16(b));
  const unsigned blocks = grid_stride_blocks((n + kChunk - 1) / kChunk);
  auto* o = static_cast<T*>(out);
  const auto* pa = static_cast<const T*>(a);
  const auto* pb = static_cast<const T*>(b);
  if (vec) {
    launch(map_kernel<T, Op, true>, blocks, kGridStrideThreads, 0, stream, name, o, pa, pb, n, op);
  } else {
    launch(map_kernel<T, Op, false>, blocks, kGridStrideThreads, 0, stream, name, o, pa, pb, n, op);
  }
}

// ---- gather ---------------------------------------------------------------------
// Elements of elem_bytes move as `words` units of U each (the widest unit
// dividing the element size and both pointers' alignment).
template <typename U>
__global__ void gather_kernel(U* dst, const U* src, const uint64_t* indices, size_t n,
                              size_t words) {
  const size_t total = n * words;
  for (size_t i = grid_thread_index(); i < total; i += grid_thread_count()) {
    const size_t j = i / words, r = i % words;
    dst[i] = src[size_t(indices[j]) * words + r];
  }
}

template <typename U>
void gather_as(void* dst, const void* src, size_t elem_bytes, const uint64_t* indices, size_t n,
               Stream stream) {
  const size_t words = elem_bytes / sizeof(U);
  launch(gather_kernel<U>, grid_stride_blocks(n * words), kGridStrideThreads, 0, stream, "gather",
         static_cast<U*>(dst), static_cast<const U*>(src), indices, n, words);
}

}  // namespace

void gelu_forward(DType dt, void* out, const void* inp, size_t n, Stream stream) {
  with_dtype(dt, [&](auto tag) {
    using S = decltype(tag);
    map<S>("gelu_forward", out, inp, nullptr, n, GeluForward<S>{}, stream);
  });
}

void gelu_backward(DType dt, void* dinp, GradWrite dinp_mode, const void* inp, const void* dout,
                   size_t n, Stream stream) {
  with_dtype(dt, [&](auto tag) {
    using S = decltype(tag);
    if (dinp_mode == GradWrite::kAccumulate) {
      map<S>("gelu_backward", dinp, inp, dout, n, GeluBackward<S, true>{}, stream);
    } else {
      map<S>("gelu_backward", dinp, inp, dout, n, GeluBackward<S, false>{}, stream);
    }
  });
}

void residual_forward(DType dt, void* out, const void* a, const void* b, size_t n, Stream stream) {
  with_dtype(dt, [&](auto tag) {
    map<decltype(tag)>("residual_forward", out, a, b, n, Residual{}, stream);
  });
}

void gather(void* dst, const void* src, size_t elem_bytes, const uint64_t* indices, size_t n,
            Stream stream) {
  if (n == 0 || elem_bytes == 0) return;
  const uintptr_t align = reinterpret_cast<uintptr_t>(dst) | reinterpret_cast<uintptr_t>(src);
  const auto fits = [&](size_t unit) { return elem_bytes % unit == 0 && align % unit == 0; };
  if (fits(8)) {
    gather_as<uint64_t>(dst, src, elem_bytes, indices, n, stream);
  } else if (fits(4)) {
    gather_as<uint32_t>(dst, src, elem_bytes, indices, n, stream);
  } else if (fits(2)) {
    gather_as<uint16_t>(dst, src, elem_bytes, indices, n, stream);
  } else {
    gather_as<uint8_t>(dst, src, elem_bytes, indices, n, stream);
  }
}

}  // namespace srkit::cuda

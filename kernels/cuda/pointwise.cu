// Element-wise ops and the embedding lookup (kernels/cuda/pointwise.h). Every
// output element is one call of the CPU op's element expression
// (kernels/cpu/ops_pointwise.cpp, ops_encoder.cpp) rounded once, so the bits
// equal the CPU backend's.
//
// Shape: grid-stride loops over 8-element chunks, 256 threads a block and at
// most kMaxBlocks blocks (enough to fill 132 SMs several times over, few
// enough that each thread loops a while). A chunk moves as 128-bit accesses
// when every pointer is 16-byte aligned, element by element otherwise (and in
// the tail), so loads and stores of a warp are coalesced either way.
#include <algorithm>

#include "kernels/common/math.h"
#include "kernels/cuda/elements.cuh"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/pointwise.h"

namespace srkit::cuda {
namespace {

constexpr int kThreads = 256;
constexpr size_t kMaxBlocks = 8192;

unsigned blocks_for(size_t work_items) {
  return unsigned(
      std::max<size_t>(1, std::min(kMaxBlocks, (work_items + kThreads - 1) / kThreads)));
}

__device__ __forceinline__ size_t thread_index() {
  return size_t(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ __forceinline__ size_t grid_threads() { return size_t(gridDim.x) * blockDim.x; }

// ---- element maps: out[i] = op(a[i], b[i], out[i]) ------------------------------
// An op says which operands it reads (kReadsB, kReadsOut); out[i] is read only
// when the op needs it (an accumulated gradient).
struct GeluForward {
  static constexpr bool kReadsB = false, kReadsOut = false;
  __device__ float operator()(float x, float, float) const { return gelu(x); }
};
struct Residual {
  static constexpr bool kReadsB = true, kReadsOut = false;
  __device__ float operator()(float a, float b, float) const { return a + b; }
};
// dinp = base + gelu'(inp) * dout, base = the old dinp (kAccumulate) or 0, as
// kernels/cpu/ops_pointwise.cpp (0.0f + d, like the CPU: -0 becomes +0).
template <bool kAccumulate>
struct GeluBackward {
  static constexpr bool kReadsB = true, kReadsOut = kAccumulate;
  __device__ float operator()(float x, float dout, float old) const {
    const float d = gelu_grad(x) * dout;
    return (kAccumulate ? old : 0.0f) + d;
  }
};

template <typename T, typename Op, bool kVec>
__global__ void map_kernel(T* out, const T* a, const T* b, size_t n, Op op) {
  const size_t chunks = (n + kChunk - 1) / kChunk;
  for (size_t c = thread_index(); c < chunks; c += grid_threads()) {
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
  const unsigned blocks = blocks_for((n + kChunk - 1) / kChunk);
  auto* o = static_cast<T*>(out);
  const auto* pa = static_cast<const T*>(a);
  const auto* pb = static_cast<const T*>(b);
  if (vec) {
    launch(map_kernel<T, Op, true>, blocks, kThreads, 0, stream, name, o, pa, pb, n, op);
  } else {
    launch(map_kernel<T, Op, false>, blocks, kThreads, 0, stream, name, o, pa, pb, n, op);
  }
}

// ---- encoder forward ------------------------------------------------------------
// One work item per 8-element chunk of an output row (kVec: C % 8 == 0 and
// every table aligned, so chunks never straddle rows) or per element; items
// of a row are consecutive, so a warp reads consecutive columns of wte and wpe.
template <typename T, bool kVec>
__global__ void encoder_forward_kernel(T* out, const int32_t* tokens, const T* wte, const T* wpe,
                                       int Tn, int C, size_t positions) {
  const int width = kVec ? kChunk : 1;
  const size_t per_row = size_t(C / width);
  const size_t items = positions * per_row;
  for (size_t it = thread_index(); it < items; it += grid_threads()) {
    const size_t p = it / per_row;
    const size_t c0 = (it % per_row) * width;
    const T* e = wte + size_t(tokens[p]) * C + c0;
    const T* w = wpe + (p % size_t(Tn)) * C + c0;
    T* o = out + p * C + c0;
    if (kVec) {
      float xe[kChunk], xw[kChunk];
      load8_aligned(e, xe);
      load8_aligned(w, xw);
      for (int k = 0; k < kChunk; ++k) xe[k] = xe[k] + xw[k];
      store8_aligned(o, xe);
    } else {
      store_f32(o, load_f32(e) + load_f32(w));
    }
  }
}

// ---- gather ---------------------------------------------------------------------
// Elements of elem_bytes move as `words` units of U each (the widest unit
// dividing the element size and both pointers' alignment).
template <typename U>
__global__ void gather_kernel(U* dst, const U* src, const uint64_t* indices, size_t n,
                              size_t words) {
  const size_t total = n * words;
  for (size_t i = thread_index(); i < total; i += grid_threads()) {
    const size_t j = i / words, r = i % words;
    dst[i] = src[size_t(indices[j]) * words + r];
  }
}

template <typename U>
void gather_as(void* dst, const void* src, size_t elem_bytes, const uint64_t* indices, size_t n,
               Stream stream) {
  const size_t words = elem_bytes / sizeof(U);
  launch(gather_kernel<U>, blocks_for(n * words), kThreads, 0, stream, "gather",
         static_cast<U*>(dst), static_cast<const U*>(src), indices, n, words);
}

}  // namespace

void encoder_forward(DType dt, void* out, const int32_t* tokens, const void* wte, const void* wpe,
                     int B, int T, int C, Stream stream) {
  check_shape(B > 0 && T > 0 && C > 0, "encoder_forward",
              "B=" + std::to_string(B) + " T=" + std::to_string(T) + " C=" + std::to_string(C),
              "all > 0");
  const size_t positions = size_t(B) * size_t(T);
  const bool vec = C % kChunk == 0 && aligned16(out) && aligned16(wte) && aligned16(wpe);
  with_dtype(dt, [&](auto tag) {
    using S = decltype(tag);
    auto* o = static_cast<S*>(out);
    const auto* e = static_cast<const S*>(wte);
    const auto* w = static_cast<const S*>(wpe);
    const size_t items = positions * size_t(vec ? C / kChunk : C);
    if (vec) {
      launch(encoder_forward_kernel<S, true>, blocks_for(items), kThreads, 0, stream,
             "encoder_forward", o, tokens, e, w, T, C, positions);
    } else {
      launch(encoder_forward_kernel<S, false>, blocks_for(items), kThreads, 0, stream,
             "encoder_forward", o, tokens, e, w, T, C, positions);
    }
  });
}

void gelu_forward(DType dt, void* out, const void* inp, size_t n, Stream stream) {
  with_dtype(dt, [&](auto tag) {
    map<decltype(tag)>("gelu_forward", out, inp, nullptr, n, GeluForward{}, stream);
  });
}

void gelu_backward(DType dt, void* dinp, GradWrite dinp_mode, const void* inp, const void* dout,
                   size_t n, Stream stream) {
  with_dtype(dt, [&](auto tag) {
    using S = decltype(tag);
    if (dinp_mode == GradWrite::kAccumulate) {
      map<S>("gelu_backward", dinp, inp, dout, n, GeluBackward<true>{}, stream);
    } else {
      map<S>("gelu_backward", dinp, inp, dout, n, GeluBackward<false>{}, stream);
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

// The deterministic embedding backward (kernels/cuda/encoder.h), bit-equal to
// kernels/cpu/encoder.cpp: each output element is owned by one thread,
// which adds the rows of dout that feed it in position order, in fp32 from
// 0.0f, then rounds once into the stored gradient: the CPU's sums, term for
// term. No atomics: the grouping of positions by token comes from the host's
// plan (EncoderBackwardPlan), so no device sort either.
//
// Shape: one work item per (output row, 8-column chunk) (per column when C is
// not a multiple of 8 or a table is unaligned); the output rows are the T rows
// of dwpe, then one row of dwte per distinct token. Items of a row are
// consecutive, so a warp reads 32 consecutive chunks of each dout row it adds
// (128-bit loads). A group's positions are added in order (the order is the
// contract; a token that fills much of the batch makes its row's items long),
// with the loads of kRowsInFlight of them, and of the stored gradient, in
// flight at once.
#include <algorithm>
#include <numeric>

#include "kernels/cuda/elements.cuh"
#include "kernels/cuda/encoder.h"
#include "kernels/cuda/launch.cuh"

namespace srkit::cuda {
namespace {

// Rows of dout a thread keeps in flight: few registers (4 chunks), as most
// token groups hold one or two positions and occupancy carries their loads.
constexpr int kRowsInFlight = 4;

template <typename T, typename G, bool kVec>
__global__ void encoder_backward_kernel(G* dwte, G* dwpe, const T* dout, const int32_t* plan,
                                        int groups, int B, int Tn, int C) {
  const size_t N = size_t(B) * size_t(Tn);
  const int32_t* order = plan;
  const int32_t* start = plan + N;
  const int32_t* token = plan + 2 * N + 1;
  const int width = kVec ? kChunk : 1;
  const size_t per_row = size_t(C / width);
  const size_t items = (size_t(Tn) + size_t(groups)) * per_row;
  for (size_t it = grid_thread_index(); it < items; it += grid_thread_count()) {
    const size_t row = it / per_row;
    const size_t c0 = (it % per_row) * width;
    const bool position_row = row < size_t(Tn);
    const size_t g = row - size_t(Tn);  // the token group (when !position_row)
    G* dst = position_row ? dwpe + row * C + c0 : dwte + size_t(token[g]) * C + c0;
    // The stored gradient is loaded first, so that its load is in flight with the rows'.
    const RawChunk<G> stored = kVec ? load_raw_chunk(dst) : load_raw_chunk(dst, width);
    float acc[kChunk] = {};
    if (position_row) {  // dwpe[t] += sum over b of dout[b, t]
      add_rows<kRowsInFlight, kVec, T>(
          [&](int b) { return dout + (size_t(b) * Tn + row) * C + c0; }, B, width, acc);
    } else {  // dwte[token] += sum over the group's positions
      const int32_t* positions = order + start[g];
      add_rows<kRowsInFlight, kVec, T>([&](int j) { return dout + size_t(positions[j]) * C + c0; },
                                       start[g + 1] - start[g], width, acc);
    }
    float x[kChunk];
    widen_chunk(stored, x);
    for (int k = 0; k < width; ++k) x[k] = x[k] + acc[k];
    store_chunk<kVec>(dst, width, x);
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
  for (size_t it = grid_thread_index(); it < items; it += grid_thread_count()) {
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
      launch(encoder_forward_kernel<S, true>, grid_stride_blocks(items), kGridStrideThreads, 0,
             stream, "encoder_forward", o, tokens, e, w, T, C, positions);
    } else {
      launch(encoder_forward_kernel<S, false>, grid_stride_blocks(items), kGridStrideThreads, 0,
             stream, "encoder_forward", o, tokens, e, w, T, C, positions);
    }
  });
}

void EncoderBackwardPlan::build(const int32_t* host_tokens, int N) {
  const size_t n = N > 0 ? size_t(N) : 0;
  // Stable by construction: ties in the token are ordered by position, and
  // std::sort works in place (std::stable_sort would allocate a buffer).
  order_.resize(n);
  std::iota(order_.begin(), order_.end(), 0);
  std::sort(order_.begin(), order_.end(), [host_tokens](int32_t a, int32_t b) {
    return host_tokens[a] < host_tokens[b] || (host_tokens[a] == host_tokens[b] && a < b);
  });
  group_start_.clear();
  group_token_.clear();
  for (size_t i = 0; i < n; ++i) {
    const int32_t tok = host_tokens[order_[i]];
    if (i == 0 || tok != host_tokens[order_[i - 1]]) {
      group_start_.push_back(int32_t(i));
      group_token_.push_back(tok);
    }
  }
  group_start_.push_back(int32_t(n));
  packed_.assign(3 * n + 1, 0);
  std::copy(order_.begin(), order_.end(), packed_.begin());
  std::copy(group_start_.begin(), group_start_.end(), packed_.begin() + n);
  std::copy(group_token_.begin(), group_token_.end(), packed_.begin() + 2 * n + 1);
}

void encoder_backward(DType dt, DType grad_dt, void* dwte, void* dwpe, const void* dout,
                      const void* device_plan, int groups, int B, int T, int C, Stream stream) {
  check_shape(B > 0 && T > 0 && C > 0, "encoder_backward",
              "B=" + std::to_string(B) + " T=" + std::to_string(T) + " C=" + std::to_string(C),
              "all > 0");
  const bool vec = C % kChunk == 0 && aligned16(dwte) && aligned16(dwpe) && aligned16(dout);
  const size_t items = (size_t(T) + size_t(groups)) * size_t(vec ? C / kChunk : C);
  const unsigned blocks = grid_stride_blocks(items);
  const auto* plan = static_cast<const int32_t*>(device_plan);
  with_grad_dtypes(dt, grad_dt, [&](auto tag, auto grad_tag) {
    using S = decltype(tag);
    using G = decltype(grad_tag);
    auto* te = static_cast<G*>(dwte);
    auto* pe = static_cast<G*>(dwpe);
    const auto* g = static_cast<const S*>(dout);
    if (vec) {
      launch(encoder_backward_kernel<S, G, true>, blocks, kGridStrideThreads, 0, stream,
             "encoder_backward", te, pe, g, plan, groups, B, T, C);
    } else {
      launch(encoder_backward_kernel<S, G, false>, blocks, kGridStrideThreads, 0, stream,
             "encoder_backward", te, pe, g, plan, groups, B, T, C);
    }
  });
}

}  // namespace srkit::cuda

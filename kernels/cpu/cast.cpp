#include "kernels/cpu/cast.h"

#include <algorithm>

#include "kernels/common/sr_bits.h"
#include "kernels/cpu/isa_target.h"
#include "kernels/cpu/philox_simd.h"

namespace srkit::cpu {
namespace {

// Below this many elements one thread is faster than waking a team.
constexpr size_t kParallelMin = size_t(1) << 15;

// Casts stream in blocks of 64 elements (SR: 256, one batch of bits). Each
// block prefetches the input, and the output with intent to write,
// kPrefetchBytes of input ahead: with the hardware prefetcher alone a 2-thread
// fp32 -> bf16 cast of 256 MB ran at ~65% of memcpy, with this at ~90%.
constexpr size_t kBlock = 64;
constexpr size_t kPrefetchBytes = 2048;
constexpr size_t kCacheLine = 64;

// The kElems elements from p. kRw: 0 to read, 1 to write (__builtin_prefetch
// wants a constant).
template <size_t kElems, int kRw, typename T>
inline void prefetch_block(const T* p) {
  const char* c = reinterpret_cast<const char*>(p);
  for (size_t line = 0; line < kElems * sizeof(T); line += kCacheLine) {
    __builtin_prefetch(c + line, kRw);
  }
}

// Runs block(i0) for i0 = begin, begin + kB, ... while a whole block of kB
// elements fits in n, spread over the OpenMP threads in contiguous ranges;
// returns where the remaining (< kB) elements start.
template <size_t kB, typename In, typename Out, typename Block>
size_t for_each_block(const In* in, Out* out, size_t begin, size_t n, Block&& block) {
  const size_t blocks = (n - begin) / kB;
  const size_t ahead = kPrefetchBytes / sizeof(In);
#pragma omp parallel for schedule(static) if (blocks * kB >= kParallelMin)
  for (size_t b = 0; b < blocks; ++b) {
    const size_t i0 = begin + b * kB;
    if (i0 + ahead + kB <= n) {
      prefetch_block<kB, 0>(in + i0 + ahead);
      prefetch_block<kB, 1>(out + i0 + ahead);
    }
    block(i0);
  }
  return begin + blocks * kB;
}

// SR of one batch. Batches of finite inputs (all but a vanishing few) take
// float_to_bf16_sr's finite branch, (bits + r) >> 16, without the per-element
// NaN/Inf selects; any special sends the batch through the full rule.
[[gnu::always_inline]] inline void sr_batch_body(const float* x, bf16* y, const uint16_t* r) {
  uint32_t max_magnitude = 0;
#pragma omp simd reduction(max : max_magnitude)
  for (size_t e = 0; e < kSrBitsBatch; ++e) {
    max_magnitude = std::max(max_magnitude, float_as_bits(x[e]) & 0x7fffffffu);
  }
  if (max_magnitude < 0x7f800000u) {
#pragma omp simd
    for (size_t e = 0; e < kSrBitsBatch; ++e) {
      y[e] = bf16{uint16_t((float_as_bits(x[e]) + r[e]) >> 16)};
    }
  } else {
#pragma omp simd
    for (size_t e = 0; e < kSrBitsBatch; ++e) y[e] = float_to_bf16_sr(x[e], r[e]);
  }
}

// The batch compiled for the baseline (AVX2) and for AVX-512, chosen with the
// SR bits' generator (SrStream::avx512, kernels/cpu/cpu_isa.h): integer adds,
// shifts and selects, so the bits cannot depend on the vector width. (A
// function of its own per ISA: an OpenMP region's body is outlined before
// inlining and would keep the baseline's instructions.)
void sr_batch(const float* x, bf16* y, const uint16_t* r) { sr_batch_body(x, y, r); }

SRKIT_AVX512_WARNINGS_BEGIN
SRKIT_TARGET_AVX512 void sr_batch_avx512(const float* x, bf16* y, const uint16_t* r) {
  sr_batch_body(x, y, r);
}
SRKIT_AVX512_WARNINGS_END

}  // namespace

void cast_f32_to_bf16_rn(const float* in, bf16* out, size_t n) {
  const size_t tail = for_each_block<kBlock>(in, out, 0, n, [=](size_t i0) {
#pragma omp simd
    for (size_t e = i0; e < i0 + kBlock; ++e) out[e] = float_to_bf16_rn(in[e]);
  });
  for (size_t i = tail; i < n; ++i) out[i] = float_to_bf16_rn(in[i]);
}

void cast_bf16_to_f32(const bf16* in, float* out, size_t n) {
  const size_t tail = for_each_block<kBlock>(in, out, 0, n, [=](size_t i0) {
#pragma omp simd
    for (size_t e = i0; e < i0 + kBlock; ++e) out[e] = bf16_to_float(in[e]);
  });
  for (size_t i = tail; i < n; ++i) out[i] = bf16_to_float(in[i]);
}

void cast_f16_to_f32(const fp16* in, float* out, size_t n) {
  const size_t tail = for_each_block<kBlock>(in, out, 0, n, [=](size_t i0) {
    for (size_t e = i0; e < i0 + kBlock; ++e) out[e] = fp16_to_float(in[e]);
  });
  for (size_t i = tail; i < n; ++i) out[i] = fp16_to_float(in[i]);
}

void cast_f32_to_bf16_sr(const float* in, bf16* out, size_t n, uint64_t seed, RngPurpose purpose,
                         uint64_t step, uint64_t base_index) {
  check_sr_step("cast_f32_to_bf16_sr", step);
  // Elements before the first global index that starts a Philox group, then
  // whole batches of 256 (32 groups), then the rest from one more batch: each
  // element's bits are sr_bits16(seed, purpose, step, base_index + i) however
  // the array is cut.
  const size_t head = std::min<size_t>(
      n, (kSrElementsPerPhilox - base_index % kSrElementsPerPhilox) % kSrElementsPerPhilox);
  for (size_t i = 0; i < head; ++i) {
    out[i] = float_to_bf16_sr(in[i], sr_bits16(seed, purpose, step, base_index + i));
  }
  const SrStream s = sr_stream(seed, purpose, step);
  const uint64_t group_head = (base_index + head) / kSrElementsPerPhilox;
  auto group_of = [&](size_t i) { return group_head + (i - head) / kSrElementsPerPhilox; };
  const size_t tail = for_each_block<kSrBitsBatch>(in, out, head, n, [&](size_t i0) {
    alignas(32) uint16_t bits[kSrBitsBatch];
    sr_bits_batch(s, group_of(i0), bits);
    if (s.avx512) {
      sr_batch_avx512(in + i0, out + i0, bits);
    } else {
      sr_batch(in + i0, out + i0, bits);
    }
  });
  if (tail < n) {  // fewer than a batch left, starting on a group boundary
    alignas(32) uint16_t bits[kSrBitsBatch];
    sr_bits_batch(s, group_of(tail), bits);
    for (size_t i = tail; i < n; ++i) out[i] = float_to_bf16_sr(in[i], bits[i - tail]);
  }
}

}  // namespace srkit::cpu

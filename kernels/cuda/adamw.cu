#include <cstdint>
#include <vector>

#include "kernels/common/adamw.h"
#include "kernels/common/sr_bits.h"
#include "kernels/cuda/adamw.h"
#include "kernels/cuda/device.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/warp.cuh"

namespace srkit::cuda {
namespace {

// A warp steps 256 consecutive elements (32 SR groups of 8): lane L draws the
// Philox block of group L once, then the warp walks the 256 elements 32 at a
// time (coalesced), each lane fetching its element's 16 bits from the lane
// that holds the group by shuffles.
constexpr int kThreads = 256;
constexpr int kWarpElems = 256;
constexpr uint64_t kBlockElems = uint64_t(kThreads / 32) * kWarpElems;

// Equal-decay runs of the segments over [begin, end): run r covers global
// indices [runs[r-1].end, runs[r].end).
struct DecayRun {
  uint64_t end;
  int decay;
};

struct Partial {
  double update_sq, weight_sq;
  unsigned long long nonzero, erased, m_stalled, v_stalled;
};

__device__ void add_to(Partial& a, const Partial& b) {
  a.update_sq += b.update_sq;
  a.weight_sq += b.weight_sq;
  a.nonzero += b.nonzero;
  a.erased += b.erased;
  a.m_stalled += b.m_stalled;
  a.v_stalled += b.v_stalled;
}

// Tree sum over the block in a fixed order; thread 0 holds the result.
__device__ Partial sum_over_block(const Partial& mine) {
  __shared__ Partial sh[kThreads];
  sh[threadIdx.x] = mine;
  __syncthreads();
  for (int s = kThreads / 2; s > 0; s >>= 1) {
    if (int(threadIdx.x) < s) add_to(sh[threadIdx.x], sh[threadIdx.x + s]);
    __syncthreads();
  }
  return sh[0];
}

// The 16 SR bits of element 32 * j + lane of the warp's tile: its group
// 4 * j + lane / 8 was drawn by that lane; its lane within the group is lane % 8
// (the tile starts on a group boundary). Every lane must call this.
__device__ uint32_t shuffled_bits(const Philox4& mine, int j, int lane) {
  const int src = 4 * j + (lane >> 3);
  Philox4 b;
  for (int w = 0; w < 4; ++w) b.v[w] = warp_shfl(mine.v[w], src);
  return sr_lane(b, unsigned(lane & 7));
}

template <AdamWWeightMode WM, AdamWStateMode MM, AdamWStateMode VM>
__global__ void __launch_bounds__(kThreads)
    adamw_kernel(AdamWArrays<WM, MM, VM> a, uint64_t begin, uint64_t end, uint64_t base,
                 const DecayRun* runs, int nruns, AdamWHyper h, Partial* partials) {
  using A = AdamWArrays<WM, MM, VM>;
  const int lane = lane_id(), warp = warp_id();
  const uint64_t tile = base + uint64_t(blockIdx.x) * kBlockElems + uint64_t(warp) * kWarpElems;
  const uint64_t group = tile / 8 + uint64_t(lane);
  Philox4 bw{}, bm{}, bv{};
  if constexpr (A::kWeightSR) {
    bw = sr_block(h.seed, RngPurpose::kWeightUpdate, h.step, group);
  }
  if constexpr (A::kMomentSR) bm = sr_block(h.seed, RngPurpose::kFirstMoment, h.step, group);
  if constexpr (A::kVarianceSR) {
    bv = sr_block(h.seed, RngPurpose::kSecondMoment, h.step, group);
  }
  // First run ending after this lane's first element; elements only increase.
  int r = 0;
  for (int lo = 0, hi = nruns - 1; lo <= hi;) {
    const int mid = (lo + hi) / 2;
    if (runs[mid].end > tile + uint64_t(lane)) {
      r = mid;
      hi = mid - 1;
    } else {
      lo = mid + 1;
    }
  }
  Partial acc{};
  for (int j = 0; j < kWarpElems / 32; ++j) {
    const uint64_t gi = tile + uint64_t(32 * j + lane);
    const uint32_t rw = A::kWeightSR ? shuffled_bits(bw, j, lane) : 0u;
    const uint32_t rm = A::kMomentSR ? shuffled_bits(bm, j, lane) : 0u;
    const uint32_t rv = A::kVarianceSR ? shuffled_bits(bv, j, lane) : 0u;
    if (gi < begin || gi >= end) continue;
    while (runs[r].end <= gi) ++r;
    const AdamWElemOut o = adamw_element(a, size_t(gi - begin), runs[r].decay != 0, h, rw, rm, rv);
    if (partials) {
      acc.update_sq += double(o.update) * double(o.update);
      acc.weight_sq += double(o.weight) * double(o.weight);
      acc.nonzero += o.update != 0.0f;
      acc.erased += adamw_erased(o.update, o.weight);
      acc.m_stalled += o.m_stalled;
      acc.v_stalled += o.v_stalled;
    }
  }
  if (partials) {
    const Partial sum = sum_over_block(acc);
    if (threadIdx.x == 0) partials[blockIdx.x] = sum;
  }
}

// out = sum of partials[0..n) by one block in a fixed order.
__global__ void __launch_bounds__(kThreads)
    sum_partials(const Partial* partials, size_t n, Partial* out) {
  Partial acc{};
  for (size_t i = threadIdx.x; i < n; i += kThreads) add_to(acc, partials[i]);
  const Partial sum = sum_over_block(acc);
  if (threadIdx.x == 0) *out = sum;
}

struct Launch {
  const AdamWBuffers& buffers;
  uint64_t begin, end, base;
  unsigned blocks;
  const DecayRun* runs;
  int nruns;
  const AdamWHyper& h;
  Partial* partials;
  Stream stream;

  template <AdamWWeightMode WM, AdamWStateMode MM, AdamWStateMode VM>
  void run() const {
    launch(adamw_kernel<WM, MM, VM>, blocks, kThreads, 0, stream, "adamw_kernel",
           AdamWArrays<WM, MM, VM>::from(buffers), begin, end, base, runs, nruns, h, partials);
  }
};

std::vector<DecayRun> decay_runs(const ParamSegment* segs, size_t nseg, size_t begin, size_t end) {
  std::vector<DecayRun> runs;
  for (size_t s = 0; s < nseg; ++s) {
    const size_t lo = segs[s].offset, hi = segs[s].offset + segs[s].count;
    if (hi <= begin || lo >= end || lo == hi) continue;
    const int decay = segs[s].decay ? 1 : 0;
    if (!runs.empty() && runs.back().decay == decay) {
      runs.back().end = hi;
    } else {
      runs.push_back(DecayRun{hi, decay});
    }
  }
  runs.back().end = end;  // the last run may extend past end; nothing reads beyond it
  return runs;
}

}  // namespace

void adamw_step(const AdamWRule& rule, const AdamWBuffers& buffers, const ParamSegment* segs,
                size_t nseg, size_t begin, size_t end, const AdamWHyper& hyper,
                AdamWTelemetry* telemetry, Stream stream) {
  adamw_check_call("cuda::adamw_step", rule, buffers, segs, nseg, begin, end, hyper);
  if (telemetry) *telemetry = AdamWTelemetry{};
  if (begin == end) return;

  const std::vector<DecayRun> runs = decay_runs(segs, nseg, begin, end);
  const uint64_t base = begin / 8 * 8;  // warp tiles start on SR group boundaries
  const uint64_t blocks = (end - base + kBlockElems - 1) / kBlockElems;
  if (blocks > 0x7fffffffu) throw std::invalid_argument("cuda::adamw_step: range too large");

  // Runs, then (with telemetry) one partial per block and the total.
  const size_t runs_bytes = runs.size() * sizeof(DecayRun);
  const size_t partial_offset = (runs_bytes + 255) / 256 * 256;
  const size_t bytes = partial_offset + (telemetry ? (blocks + 1) * sizeof(Partial) : 0);
  void* scratch = nullptr;
  check(cudaMallocAsync(&scratch, bytes, stream), "cudaMallocAsync");
  char* base_ptr = static_cast<char*>(scratch);
  const DecayRun* d_runs = reinterpret_cast<const DecayRun*>(base_ptr);
  Partial* d_partials = telemetry ? reinterpret_cast<Partial*>(base_ptr + partial_offset) : nullptr;
  try {
    check(cudaMemcpyAsync(base_ptr, runs.data(), runs_bytes, cudaMemcpyHostToDevice, stream),
          "cudaMemcpyAsync (decay runs)");
    Launch kernel{buffers,          begin, end,        base,  unsigned(blocks), d_runs,
                  int(runs.size()), hyper, d_partials, stream};
    adamw_dispatch(rule, kernel);
    if (telemetry) {
      launch(sum_partials, 1, kThreads, 0, stream, "sum_partials", d_partials, blocks,
             d_partials + blocks);
      Partial total{};
      check(cudaMemcpyAsync(&total, d_partials + blocks, sizeof total, cudaMemcpyDeviceToHost,
                            stream),
            "cudaMemcpyAsync (telemetry)");
      check(cudaStreamSynchronize(stream), "cudaStreamSynchronize (telemetry)");
      *telemetry = AdamWTelemetry{total.update_sq, total.weight_sq, end - begin,    total.nonzero,
                                  total.erased,    total.m_stalled, total.v_stalled};
    }
  } catch (...) {
    cudaFreeAsync(scratch, stream);
    throw;
  }
  check(cudaFreeAsync(scratch, stream), "cudaFreeAsync");
}

}  // namespace srkit::cuda

// The fused AdamW step (kernels/cuda/adamw.h). Every element goes through
// adamw_element (kernels/common/adamw.h) with the SR bits of the random-bits
// contract at its global index, so the stored bits equal the CPU step's for
// every strategy, whatever the tiling.
//
// Shape: a warp steps a tile of 256 consecutive elements (32 SR groups of 8,
// tiles start on group boundaries), lane L the 8 elements of group L: it draws
// the group's Philox blocks and, where the group lies wholly in the range and
// the arrays are 16-byte aligned at it (a range starting on a group boundary),
// moves each array's 8 elements with one 128-bit access per 16 bytes (a warp
// reads 512 contiguous bytes of each bf16 array per access), stepping them in
// registers through the same adamw_element. Groups cut by the range's ends,
// and every group of a range that starts mid-group, step element by element
// from memory. A block of 8 warps covers 2048 elements; at most kMaxBlocks
// blocks loop over the range (enough to fill 132 SMs, and a fixed bound on the
// telemetry partial sums, one per block, in the plan).
//
// The plan block (built once on the host, adamw_plan_image):
//   [Partial x blocks]  telemetry partial sums, written by each step
//   [PlanHeader]        the number of decay runs (256-byte aligned)
//   [DecayRun x nruns]  the equal-decay runs of the segments over [begin, end)
// Its offsets depend on begin and end only, so a step finds them without a
// host read. No allocation and no host wait per step; the clip factor and
// whether to step at all come from the device GradClip.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <vector>

#include "kernels/common/adamw.h"
#include "kernels/common/sr_bits.h"
#include "kernels/common/step_record.h"
#include "kernels/cuda/adamw.h"
#include "kernels/cuda/elements.cuh"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/warp.cuh"

namespace srkit::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kWarpElems = 256;
constexpr uint64_t kBlockElems = uint64_t(kThreads / 32) * kWarpElems;
constexpr uint64_t kMaxBlocks = 1024;

// Equal-decay runs of the segments over [begin, end): run r covers global
// indices [runs[r-1].end, runs[r].end).
struct DecayRun {
  uint64_t end;
  int32_t decay;
  int32_t pad_;  // explicit: the plan image has no indeterminate bytes
};

struct PlanHeader {
  uint64_t nruns;
  uint64_t pad_;
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

// The arrays of a family as 8-element chunks in registers: load the group at
// i0 (16-byte aligned, wholly in range), step it through arrays() with the
// indices 0..7, store it back. Only the arrays the family reads are loaded
// (an f32 master's bf16 weights are write-only) and only those it writes are
// stored.
template <typename A>
struct AdamWChunk {
  typename A::W w[kChunk];
  typename A::Grad g[kChunk];
  typename A::Master master[kChunk];
  typename A::M m[kChunk];
  typename A::V v[kChunk];
  bf16 kahan[kChunk];

  __device__ __forceinline__ void load(const A& a, size_t i0) {
    if constexpr (A::kWeightMode != AdamWWeightMode::kMasterF32) load8_raw(a.w + i0, w);
    load8_raw(a.g + i0, g);
    if constexpr (A::kHasMaster) load8_raw(a.master + i0, master);
    load8_raw(a.m + i0, m);
    load8_raw(a.v + i0, v);
    if constexpr (A::kHasKahan) load8_raw(a.kahan + i0, kahan);
  }
  __device__ __forceinline__ A arrays() { return A{w, g, master, m, v, kahan}; }
  __device__ __forceinline__ void store(const A& a, size_t i0) const {
    store8_raw(a.w + i0, w);
    if constexpr (A::kHasMaster) store8_raw(a.master + i0, master);
    store8_raw(a.m + i0, m);
    store8_raw(a.v + i0, v);
    if constexpr (A::kHasKahan) store8_raw(a.kahan + i0, kahan);
  }
};

// Where the plan's parts lie, from begin and end alone.
struct PlanLayout {
  uint64_t base;   // first tile: begin rounded down to an SR group boundary
  uint64_t tiles;  // block tiles of kBlockElems covering [base, end)
  unsigned blocks;
  size_t header_offset, runs_offset;
  size_t bytes(size_t nruns) const { return runs_offset + nruns * sizeof(DecayRun); }
};

PlanLayout plan_layout(size_t begin, size_t end) {
  PlanLayout l{};
  l.base = begin / 8 * 8;
  l.tiles = begin < end ? (end - l.base + kBlockElems - 1) / kBlockElems : 0;
  l.blocks = unsigned(std::min(l.tiles, kMaxBlocks));
  l.header_offset = (size_t(l.blocks) * sizeof(Partial) + 255) / 256 * 256;
  l.runs_offset = l.header_offset + sizeof(PlanHeader);
  return l;
}

// When clip says the step must not run (!clip->ok: a non-finite loss or
// norm), every thread of the grid returns at once: nothing changes.
template <AdamWWeightMode WM, AdamWStateMode MM, AdamWStateMode VM, typename G>
__global__ void __launch_bounds__(kThreads)
    adamw_kernel(AdamWArrays<WM, MM, VM, G> a, bool vector, uint64_t begin, uint64_t end,
                 uint64_t base, uint64_t tiles, const PlanHeader* header, const DecayRun* runs,
                 AdamWHyper h, const GradClip* clip, Partial* partials) {
  using A = AdamWArrays<WM, MM, VM, G>;
  if (clip != nullptr && clip->ok == 0) return;  // uniform: no thread waits at a barrier
  if (clip != nullptr) h.grad_scale = clip->scale;
  const int nruns = int(header->nruns);
  const int lane = lane_id(), warp = warp_id();
  Partial acc{};
  for (uint64_t t = blockIdx.x; t < tiles; t += gridDim.x) {  // the same trips for the block
    const uint64_t g0 = base + t * kBlockElems + uint64_t(warp) * kWarpElems + 8 * uint64_t(lane);
    if (g0 >= end || g0 + 8 <= begin) continue;  // no barrier or shuffle follows
    const uint64_t group = g0 / 8;
    Philox4 bw{}, bm{}, bv{};
    if constexpr (A::kWeightSR) {
      bw = sr_block(h.seed, RngPurpose::kWeightUpdate, h.step, group);
    }
    if constexpr (A::kMomentSR) bm = sr_block(h.seed, RngPurpose::kFirstMoment, h.step, group);
    if constexpr (A::kVarianceSR) {
      bv = sr_block(h.seed, RngPurpose::kSecondMoment, h.step, group);
    }
    // First run ending after the group's first element in range; elements only increase.
    const uint64_t first = g0 < begin ? begin : g0;
    int r = 0;
    for (int lo = 0, hi = nruns - 1; lo <= hi;) {
      const int mid = (lo + hi) / 2;
      if (runs[mid].end > first) {
        r = mid;
        hi = mid - 1;
      } else {
        lo = mid + 1;
      }
    }
    // Element k of the group, at index i of arrays.
    const auto step_element = [&](const A& arrays, size_t i, int k) {
      while (runs[r].end <= g0 + uint64_t(k)) ++r;
      const uint32_t rw = A::kWeightSR ? sr_lane(bw, unsigned(k)) : 0u;
      const uint32_t rm = A::kMomentSR ? sr_lane(bm, unsigned(k)) : 0u;
      const uint32_t rv = A::kVarianceSR ? sr_lane(bv, unsigned(k)) : 0u;
      const AdamWElemOut o = adamw_element(arrays, i, runs[r].decay != 0, h, rw, rm, rv);
      if (partials) {
        acc.update_sq += double(o.update) * double(o.update);
        acc.weight_sq += double(o.weight) * double(o.weight);
        acc.nonzero += o.update != 0.0f;
        acc.erased += adamw_erased(o.update, o.weight);
        acc.m_stalled += o.m_stalled;
        acc.v_stalled += o.v_stalled;
      }
    };
    if (vector && g0 >= begin && g0 + 8 <= end) {
      const size_t i0 = size_t(g0 - begin);
      AdamWChunk<A> c;
      c.load(a, i0);
      const A local = c.arrays();
      SRKIT_UNROLL
      for (int k = 0; k < kChunk; ++k) step_element(local, size_t(k), k);
      c.store(a, i0);
    } else {
      for (int k = 0; k < kChunk; ++k) {
        const uint64_t gi = g0 + uint64_t(k);
        if (gi >= begin && gi < end) step_element(a, size_t(gi - begin), k);
      }
    }
  }
  if (partials) {
    const Partial sum = sum_over_block(acc);
    if (threadIdx.x == 0) partials[blockIdx.x] = sum;
  }
}

// *out = the sum of partials[0..n) by one block in a fixed order, or zeros
// when the step did not run.
__global__ void __launch_bounds__(kThreads)
    telemetry_kernel(const Partial* partials, unsigned n, uint64_t elements, const GradClip* clip,
                     AdamWTelemetry* out) {
  const bool ran = clip == nullptr || clip->ok != 0;
  Partial acc{};
  if (ran) {
    for (unsigned i = threadIdx.x; i < n; i += kThreads) add_to(acc, partials[i]);
  }
  const Partial sum = sum_over_block(acc);
  if (threadIdx.x == 0) {
    out->update_sq = sum.update_sq;
    out->weight_sq = sum.weight_sq;
    out->n = ran ? elements : 0;
    out->nonzero = sum.nonzero;
    out->erased = sum.erased;
    out->m_stalled = sum.m_stalled;
    out->v_stalled = sum.v_stalled;
  }
}

// Whether every array is 16-byte aligned at each SR group of [begin, end):
// the range starts on a group boundary and each buffer (element `begin`) is
// 16-byte aligned. Null buffers (arrays the rule lacks) do not count.
bool chunks_aligned(const AdamWBuffers& b, uint64_t begin) {
  const void* arrays[] = {b.weights, b.grads, b.master, b.m, b.v, b.kahan};
  bool ok = begin % 8 == 0;
  for (const void* p : arrays) ok = ok && (p == nullptr || aligned16(p));
  return ok;
}

struct Launch {
  const AdamWBuffers& buffers;
  uint64_t begin, end;
  const PlanLayout& layout;
  const PlanHeader* header;
  const DecayRun* runs;
  const AdamWHyper& h;
  const GradClip* clip;
  Partial* partials;
  Stream stream;

  template <AdamWWeightMode WM, AdamWStateMode MM, AdamWStateMode VM, typename G>
  void run() const {
    launch(adamw_kernel<WM, MM, VM, G>, layout.blocks, kThreads, 0, stream, "adamw_step",
           AdamWArrays<WM, MM, VM, G>::from(buffers), chunks_aligned(buffers, begin), begin, end,
           layout.base, layout.tiles, header, runs, h, clip, partials);
  }
};

std::vector<DecayRun> decay_runs(const ParamSegment* segs, size_t nseg, size_t begin, size_t end) {
  std::vector<DecayRun> runs;
  for (size_t s = 0; s < nseg; ++s) {
    const size_t lo = segs[s].offset, hi = segs[s].offset + segs[s].count;
    if (hi <= begin || lo >= end || lo == hi) continue;
    const int32_t decay = segs[s].decay ? 1 : 0;
    if (!runs.empty() && runs.back().decay == decay) {
      runs.back().end = hi;
    } else {
      runs.push_back(DecayRun{hi, decay, 0});
    }
  }
  if (!runs.empty())
    runs.back().end = end;  // the last run may extend past end; nothing reads beyond it
  return runs;
}

std::vector<DecayRun> checked_runs(const ParamSegment* segs, size_t nseg, size_t begin,
                                   size_t end) {
  if (begin > end) {
    throw std::invalid_argument("cuda::adamw_plan: begin " + std::to_string(begin) + " > end " +
                                std::to_string(end));
  }
  if (begin == end) return {};
  adamw_check_segments("cuda::adamw_plan", segs, nseg, end);
  return decay_runs(segs, nseg, begin, end);
}

}  // namespace

size_t adamw_plan_bytes(const ParamSegment* segs, size_t nseg, size_t begin, size_t end) {
  return plan_layout(begin, end).bytes(checked_runs(segs, nseg, begin, end).size());
}

std::vector<unsigned char> adamw_plan_image(const ParamSegment* segs, size_t nseg, size_t begin,
                                            size_t end) {
  const std::vector<DecayRun> runs = checked_runs(segs, nseg, begin, end);
  const PlanLayout l = plan_layout(begin, end);
  std::vector<unsigned char> image(l.bytes(runs.size()), 0);
  const PlanHeader header{runs.size(), 0};
  std::memcpy(image.data() + l.header_offset, &header, sizeof header);
  if (!runs.empty()) {
    std::memcpy(image.data() + l.runs_offset, runs.data(), runs.size() * sizeof(DecayRun));
  }
  return image;
}

void adamw_step(const AdamWRule& rule, const AdamWBuffers& buffers, void* plan, size_t begin,
                size_t end, const AdamWHyper& hyper, const GradClip* clip,
                AdamWTelemetry* telemetry, Stream stream) {
  // The segments were checked when the plan was built; the rest of the call here.
  const ParamSegment whole{0, end, true};
  adamw_check_call("cuda::adamw_step", rule, buffers, &whole, 1, begin, end, hyper);
  if (begin < end && plan == nullptr) {
    throw std::invalid_argument("cuda::adamw_step: no plan (adamw_plan_image, on the device)");
  }
  const PlanLayout l = plan_layout(begin, end);
  auto* bytes = static_cast<unsigned char*>(plan);
  auto* partials = reinterpret_cast<Partial*>(bytes);
  if (l.tiles > 0) {
    const Launch kernel{buffers,
                        begin,
                        end,
                        l,
                        reinterpret_cast<const PlanHeader*>(bytes + l.header_offset),
                        reinterpret_cast<const DecayRun*>(bytes + l.runs_offset),
                        hyper,
                        clip,
                        telemetry ? partials : nullptr,
                        stream};
    adamw_dispatch(rule, kernel);
  }
  if (telemetry) {
    launch(telemetry_kernel, 1, kThreads, 0, stream, "adamw_step (telemetry)", partials, l.blocks,
           uint64_t(end - begin), clip, telemetry);
  }
}

}  // namespace srkit::cuda

// The AdamW step's host reference, shared by the CPU kernel tests
// (tests/test_adamw.cpp) and the backend conformance suite: the element rule of
// kernels/common/adamw.h applied one element at a time, SR bits from the
// random-bits contract at the global index, telemetry summed in index order.
// What every fused pass (tiles, SIMD Philox, threads, GPU warps) must reproduce
// bit for bit (test_adamw.cpp ties the rule itself to an fp64 reference).
#pragma once

#include <gtest/gtest.h>

#include <cstddef>
#include <string>
#include <vector>

#include "kernels/common/adamw.h"
#include "kernels/common/sr_bits.h"

namespace srkit::testing {

// The AdamW rules every step test runs (CPU kernel, CUDA kernel, backend
// conformance): every weight mode and moment mode at least once, SR moments,
// fp32 moments with bf16 weights and the reverse, and fp32 gradients of bf16
// weights.
inline const std::vector<std::string> kAdamWRuleSpecs = {
    "fp32",
    "mixed",
    "bf16",
    "bf16-sr",
    "bf16-kahan",
    "bf16-rem16",
    "bf16-sr:mround=sr,vround=sr",
    "bf16:m=f32",
    "fp32:m=bf16,v=bf16,mround=sr,vround=sr",
    "mixed:m=bf16,v=bf16,vround=sr",
    "bf16-rem16:m=bf16,mround=sr",
    "bf16-kahan:v=f32",
    "bf16-sr:g=f32",
    "mixed:g=f32",
    "bf16-rem16:g=f32,m=bf16",
};

// Whether flat element i lies in a decaying segment.
inline bool decays(const std::vector<ParamSegment>& segs, size_t i) {
  for (const ParamSegment& s : segs) {
    if (i >= s.offset && i < s.offset + s.count) return s.decay;
  }
  return false;
}

// Steps [begin, end) of buffers b (shard-local: element 0 is global `begin`);
// run through adamw_dispatch(rule, *this).
struct AdamWElementByElement {
  AdamWBuffers b;
  const std::vector<ParamSegment>& segs;
  size_t begin, end;
  const AdamWHyper& h;
  AdamWTelemetry tel{};

  template <AdamWWeightMode WM, AdamWStateMode MM, AdamWStateMode VM, typename G>
  void run() {
    using A = AdamWArrays<WM, MM, VM, G>;
    const A a = A::from(b);
    tel.n = end - begin;
    for (size_t gi = begin; gi < end; ++gi) {
      auto bits = [&](RngPurpose p, bool used) {
        return used ? sr_bits16(h.seed, p, h.step, gi) : 0u;
      };
      const AdamWElemOut o = adamw_element(a, gi - begin, decays(segs, gi), h,
                                           bits(RngPurpose::kWeightUpdate, A::kWeightSR),
                                           bits(RngPurpose::kFirstMoment, A::kMomentSR),
                                           bits(RngPurpose::kSecondMoment, A::kVarianceSR));
      tel.update_sq += double(o.update) * double(o.update);
      tel.weight_sq += double(o.weight) * double(o.weight);
      tel.nonzero += o.update != 0.0f;
      tel.erased += adamw_erased(o.update, o.weight);
      tel.m_stalled += o.m_stalled;
      tel.v_stalled += o.v_stalled;
    }
  }
};

// Counts equal; the fp64 sums within `rel` (they are added in another order).
inline void expect_telemetry_eq(const AdamWTelemetry& got, const AdamWTelemetry& want, double rel,
                                const char* what = "") {
  EXPECT_EQ(got.n, want.n) << what;
  EXPECT_EQ(got.nonzero, want.nonzero) << what;
  EXPECT_EQ(got.erased, want.erased) << what;
  EXPECT_EQ(got.m_stalled, want.m_stalled) << what;
  EXPECT_EQ(got.v_stalled, want.v_stalled) << what;
  EXPECT_NEAR(got.update_sq, want.update_sq, rel * want.update_sq) << what;
  EXPECT_NEAR(got.weight_sq, want.weight_sq, rel * want.weight_sq) << what;
}

}  // namespace srkit::testing

// The GradWrite protocol of a backward op, run on one backend: every output
// poisoned and written with kOverwrite (no NaN may survive), then every other
// combination of the op's GradWrite arguments, with the accumulating outputs
// holding old values and the overwritten ones poisoned again: accumulated
// outputs must equal overwrite-result + old within one rounding, overwritten
// ones the overwrite result bit for bit (an output's mode is its own business).
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "kernels/common/grad_write.h"
#include "lib/backend/backend.h"
#include "tests/conformance/compare.h"
#include "tests/conformance/device_array.h"

namespace srkit::conformance {

// One gradient output: its name, its element count, which of the op's GradWrite
// arguments sets its mode, the old values it holds when accumulating, and
// whether it is stored in fp32 whatever the op's dtype (fp32 parameter
// gradients of bf16 activations).
struct GradOutput {
  std::string name;
  size_t n;
  int mode_arg;
  std::vector<float> old;
  bool f32 = false;
  DType storage(DType op_dt) const { return f32 ? DType::kF32 : op_dt; }
};

struct GradWriteRuns {
  std::vector<std::vector<float>> overwritten;  // per output, kOverwrite everywhere
  std::vector<std::vector<uint8_t>> overwritten_bits;
  std::vector<std::vector<float>> accumulated;  // per output, kAccumulate everywhere
  std::vector<std::vector<uint8_t>> accumulated_bits;
};

inline const char* grad_write_name(GradWrite m) {
  return m == GradWrite::kOverwrite ? "overwrite" : "accumulate";
}

// call(modes, outputs): runs the op on `backend` with modes[k] for GradWrite
// argument k, storing into outputs[k] (in the order of `outs`).
using GradCall = std::function<void(const std::vector<GradWrite>& modes, std::vector<Tensor>& out)>;

inline GradWriteRuns run_grad_write_modes(Backend& backend, DType dt,
                                          const std::vector<GradOutput>& outs, int mode_args,
                                          const GradCall& call) {
  GradWriteRuns r;
  const int combos = 1 << mode_args;
  for (int c = 0; c < combos; ++c) {  // c = 0: every output kOverwrite
    std::vector<GradWrite> modes(mode_args);
    std::string label;
    for (int k = 0; k < mode_args; ++k) {
      modes[k] = (c >> k) & 1 ? GradWrite::kAccumulate : GradWrite::kOverwrite;
      label += std::string(k ? "," : "") + grad_write_name(modes[k]);
    }
    SCOPED_TRACE("GradWrite modes (" + label + ")");
    std::vector<Tensor> t;
    for (const GradOutput& o : outs) {
      if (modes[o.mode_arg] == GradWrite::kAccumulate) {
        EXPECT_EQ(o.old.size(), o.n) << o.name;
        t.push_back(Tensor::of(backend, o.storage(dt), o.old));
      } else {
        t.push_back(Tensor::poisoned(backend, o.storage(dt), o.n));
      }
    }
    call(modes, t);
    for (size_t k = 0; k < outs.size(); ++k) {
      const GradOutput& o = outs[k];
      std::vector<float> v = t[k].values();
      std::vector<uint8_t> bits = t[k].bits();
      if (c == 0) {
        EXPECT_TRUE(no_nan(v)) << o.name << " (kOverwrite must not read the poisoned buffer)";
        r.overwritten.push_back(std::move(v));
        r.overwritten_bits.push_back(std::move(bits));
        continue;
      }
      if (modes[o.mode_arg] == GradWrite::kAccumulate) {
        EXPECT_TRUE(accumulates(o.storage(dt), v, r.overwritten[k], o.old))
            << o.name << ": kAccumulate must add to the old values";
      } else {
        EXPECT_TRUE(same_bits(bits, r.overwritten_bits[k], dtype_size(o.storage(dt))))
            << o.name << ": kOverwrite must store what it stores in every mode combination";
      }
      if (c == combos - 1) {
        r.accumulated.push_back(std::move(v));
        r.accumulated_bits.push_back(std::move(bits));
      }
    }
  }
  return r;
}

}  // namespace srkit::conformance

// The optimizer driver: owns the strategy's extra state (master weights, m, v,
// Kahan compensation) for a range of the flat parameter buffer, computes the
// global gradient norm and clip factor, and runs the one fused AdamW pass.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kernels/common/adamw.h"
#include "lib/backend/backend.h"
#include "lib/model/gpt.h"
#include "lib/precision.h"

namespace srkit {

struct AdamWSettings {
  float beta1 = 0.9f;
  float beta2 = 0.95f;
  float eps = 1e-8f;
  float weight_decay = 0.1f;
  float grad_clip = 1.0f;  // global-norm clip; <= 0 disables
};

// The kernel's hyper-parameters for a 1-based step: bias corrections computed
// in double, then rounded once to float. The optimizer and the shadow-FP32 probe
// both use it, so the probe's reference follows exactly the same arithmetic.
AdamWHyper make_adamw_hyper(uint64_t step, float lr, const AdamWSettings& settings,
                            float grad_scale, uint64_t seed);

class Optimizer {
 public:
  // Manages flat elements [begin, end) of model's buffers (the whole buffer
  // unless a ZeRO shard is given). State starts at zero; master weights start
  // equal to the model's weights. Prepares the backend's AdamW plan once.
  Optimizer(GPT& model, const PrecisionStrategy& strategy, uint64_t seed, size_t begin = 0,
            size_t end = size_t(-1));
  ~Optimizer();
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  const PrecisionStrategy& strategy() const { return strategy_; }
  Backend& backend() const { return backend_; }
  size_t begin() const { return begin_; }
  size_t end() const { return end_; }

  // Re-derive master weights from the model's current weights (after init).
  void reset_master_from_weights();

  // Enqueues one AdamW step; step is 1-based (bias correction uses it; SR bits
  // too). clip (device, nullable): this step's GradClip (scale and whether to
  // step at all; the settings' grad_clip went into it); without one, the
  // gradients are used as they are. telemetry (device, nullable): an array of
  // telemetry_slots() sums, slot r over the part of the layout's group range r
  // (ParamLayout::group_ranges) this optimizer steps, zeros where it steps none.
  //
  // Why group ranges, and not a group index in the kernels: without telemetry
  // the step is the one fused pass over [begin, end), the hot path as it was;
  // with telemetry (logging steps only) it is one pass per group range, each
  // with its own plan and telemetry slot. SR bits are keyed by global element
  // index, and every element's update reads only its own element, so the
  // split passes store exactly the bits of the single pass (tested), and the
  // kernels, CPU and CUDA, stay as they are.
  void step(uint64_t step, float lr, const AdamWSettings& settings, const GradClip* clip,
            AdamWTelemetry* telemetry);
  // The number of telemetry slots a step fills: the layout's group ranges.
  size_t telemetry_slots() const { return telemetry_slots_; }

  // The extra state, for checkpoints: safetensors names and dtypes, device pointers.
  struct StateBuffer {
    std::string name;   // "master", "master_rem16", "adam_m", "adam_v", "kahan_c"
    std::string dtype;  // safetensors dtype: F32, BF16, I16
    void* data;
    size_t bytes;
  };
  std::vector<StateBuffer> state_buffers() const;

 private:
  GPT& model_;
  Backend& backend_;
  PrecisionStrategy strategy_;
  uint64_t seed_;
  size_t begin_, end_;
  std::unique_ptr<AdamWPlan> plan_;  // [begin_, end_): steps without telemetry
  // The group ranges that meet [begin_, end_), clipped to it: steps with telemetry.
  struct RangePlan {
    size_t slot;        // index into the layout's group ranges
    size_t begin, end;  // flat elements
    std::unique_ptr<AdamWPlan> plan;
  };
  std::vector<RangePlan> range_plans_;
  size_t telemetry_slots_ = 0;
  // The step's buffers with element 0 at flat index `at` (begin_ <= at < end_).
  AdamWBuffers buffers_at(size_t at) const;
  void* master_ = nullptr;
  void* m_ = nullptr;
  void* v_ = nullptr;
  void* kahan_ = nullptr;
};

}  // namespace srkit

// Shadow-FP32 drift probe (sr-train --shadow-fp32 K): K sampled parameters get
// an fp32 copy with fp32 m and v that follows the real run's AdamW math
// (adamw_math of kernels/common/adamw.h, same gradient, clip factor, lr and
// bias correction) but never rounds. The drift of the real (stored) weights
// from their shadows is the direct measurement of what a precision strategy
// loses to rounding: RN erases small updates, SR only adds noise.
//
// Samples are spread over all tensors: sample j lies in tensor j mod T (T
// tensors), at an element drawn from Philox under (seed, j), restricted to the
// optimizer's range [begin, end) (rank 0's ZeRO shard, whose gradients are
// reduced there; with plain data parallel the whole buffer). Gradients are
// read after the data-parallel reduction, so on rank 0 they are the global
// ones; only rank 0 keeps a probe.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <vector>

#include "kernels/common/adamw.h"
#include "lib/backend/backend.h"
#include "lib/model/gpt.h"
#include "lib/train/optimizer.h"

namespace srkit {

struct ShadowDrift {
  double mean_abs_ulps = 0;  // mean |w - shadow| in ulps of w's storage format at shadow
  double max_abs_ulps = 0;
  double rel_drift = 0;  // ||w - shadow||_2 / ||shadow||_2 over the samples
};

class ShadowProbe {
 public:
  // Throws std::invalid_argument (naming --shadow-fp32) when k < 1 or the
  // range holds no tensor element. Allocates its device index and gather
  // buffers once (scratch); the probe reads the K sampled values with one gather
  // and one host read.
  ShadowProbe(Backend& backend, const ParamLayout& layout, int k, uint64_t seed, size_t begin,
              size_t end);
  ~ShadowProbe();
  ShadowProbe(const ShadowProbe&) = delete;
  ShadowProbe& operator=(const ShadowProbe&) = delete;

  const std::vector<size_t>& indices() const { return index_; }

  // Shadows start at the real weights; m and v at the optimizer's current
  // moments (zero for a fresh run, the checkpoint's after a resume).
  void init(GPT& model, const Optimizer& optimizer);

  // The real optimizer's step `step` just ran with these settings and clip
  // factor: apply the same math, unrounded, to the shadows.
  void update(GPT& model, uint64_t step, float lr, const AdamWSettings& s, float clip_scale);

  ShadowDrift drift(GPT& model) const;

  // {"type":"shadow","step","mean_abs_ulps","max_abs_ulps","rel_drift","k"}
  nlohmann::json log_line(GPT& model, uint64_t step) const;

 private:
  // The sampled elements of a device buffer of elem_bytes-wide values (2: bf16,
  // 4: fp32), widened to fp32. shard_local: the buffer covers the optimizer's
  // range only (its element 0 is global index begin).
  std::vector<float> read(const void* base, size_t elem_bytes, bool shard_local) const;

  Backend& backend_;
  uint64_t* device_index_ = nullptr;  // K global indices, then K offsets from begin
  void* device_values_ = nullptr;     // K gathered elements
  std::vector<size_t> index_;
  std::vector<bool> decay_;
  std::vector<float> w_, m_, v_;
};

}  // namespace srkit

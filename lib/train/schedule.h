// Learning-rate schedules: linear warmup, then cosine or linear decay to a
// floor, or constant.
#pragma once

#include <cstdint>
#include <string>

namespace srkit {

enum class DecayKind { kCosine, kLinear, kConstant };
DecayKind decay_from_string(const std::string& s);  // cosine|linear|constant; throws
const char* decay_name(DecayKind k);

struct LrSchedule {
  float lr = 1e-3f;
  float min_lr = 0.0f;  // floor reached at the last step
  uint64_t warmup_steps = 0;
  uint64_t total_steps = 1;
  DecayKind decay = DecayKind::kCosine;
};

// lr at 1-based step t: (lr * t / warmup) during warmup, then decays from lr at
// step warmup to min_lr at total_steps.
float lr_at(const LrSchedule& s, uint64_t step);

}  // namespace srkit

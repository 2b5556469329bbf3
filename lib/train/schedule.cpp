#include "lib/train/schedule.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace srkit {

DecayKind decay_from_string(const std::string& s) {
  if (s == "cosine") return DecayKind::kCosine;
  if (s == "linear") return DecayKind::kLinear;
  if (s == "constant") return DecayKind::kConstant;
  throw std::invalid_argument("--schedule: expected cosine, linear or constant (got '" + s + "')");
}

const char* decay_name(DecayKind k) {
  switch (k) {
    case DecayKind::kCosine:
      return "cosine";
    case DecayKind::kLinear:
      return "linear";
    case DecayKind::kConstant:
      return "constant";
  }
  return "?";
}

float lr_at(const LrSchedule& s, uint64_t step) {
  if (s.warmup_steps > 0 && step <= s.warmup_steps) {
    return float(double(s.lr) * double(step) / double(s.warmup_steps));
  }
  if (s.decay == DecayKind::kConstant || s.total_steps <= s.warmup_steps) return s.lr;
  const double progress =
      std::min(1.0, double(step - s.warmup_steps) / double(s.total_steps - s.warmup_steps));
  const double shape =
      s.decay == DecayKind::kCosine ? 0.5 * (1.0 + std::cos(M_PI * progress)) : 1.0 - progress;
  return float(double(s.min_lr) + (double(s.lr) - double(s.min_lr)) * shape);
}

}  // namespace srkit

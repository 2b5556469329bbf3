#include "lib/train/optimizer.h"

#include <algorithm>
#include <stdexcept>

#include "kernels/common/adamw_hyper.h"

namespace srkit {

AdamWHyper make_adamw_hyper(uint64_t step, float lr, const AdamWSettings& s, float grad_scale,
                            uint64_t seed) {
  AdamWHyper h{};
  h.lr = lr;
  h.beta1 = s.beta1;
  h.beta2 = s.beta2;
  h.eps = s.eps;
  h.weight_decay = s.weight_decay;
  h.bias_correction1 = adamw_bias_correction(s.beta1, step);
  h.bias_correction2 = adamw_bias_correction(s.beta2, step);
  h.grad_scale = grad_scale;
  h.seed = seed;
  h.step = step;
  return h;
}

Optimizer::Optimizer(GPT& model, const PrecisionStrategy& strategy, uint64_t seed, size_t begin,
                     size_t end)
    : model_(model),
      backend_(model.backend()),
      strategy_(strategy),
      seed_(seed),
      begin_(begin),
      end_(std::min(end, model.layout().total_size())) {
  strategy_.validate();
  if (strategy_.weights() != model.dtype()) {
    throw std::invalid_argument("optimizer: strategy weight dtype differs from the model's");
  }
  if (strategy_.grads() != model.grad_dtype()) {
    throw std::invalid_argument("optimizer: strategy gradient dtype differs from the model's");
  }
  if (begin_ >= end_ || begin_ % kParamAlign != 0) {
    throw std::invalid_argument("optimizer: shard must be non-empty and start at a multiple of " +
                                std::to_string(kParamAlign));
  }
  const AdamWRule& r = strategy_.rule;
  const size_t n = end_ - begin_;
  if (r.master == MasterKind::kF32) {
    master_ = backend_.allocate(n * 4, MemCategory::kMaster);
  } else if (r.master == MasterKind::kRem16) {
    master_ = backend_.allocate(n * 2, MemCategory::kMaster);
  }
  m_ = backend_.allocate(n * dtype_size(r.m), MemCategory::kOptState);
  v_ = backend_.allocate(n * dtype_size(r.v), MemCategory::kOptState);
  if (r.kahan) kahan_ = backend_.allocate(n * 2, MemCategory::kOptState);
  const std::vector<ParamSegment> segments = model.layout().segments();
  plan_ = backend_.prepare_adamw(segments, begin_, end_);
  const std::vector<ParamGroupRange> ranges = model.layout().group_ranges();
  telemetry_slots_ = ranges.size();
  for (size_t r = 0; r < ranges.size(); ++r) {
    const size_t lo = std::max(ranges[r].begin, begin_), hi = std::min(ranges[r].end, end_);
    if (lo < hi) range_plans_.push_back({r, lo, hi, backend_.prepare_adamw(segments, lo, hi)});
  }
  reset_master_from_weights();
}

Optimizer::~Optimizer() {
  range_plans_.clear();
  plan_.reset();
  backend_.release(kahan_);
  backend_.release(v_);
  backend_.release(m_);
  backend_.release(master_);
}

void Optimizer::reset_master_from_weights() {
  const size_t n = end_ - begin_;
  if (strategy_.rule.master == MasterKind::kF32) {
    // The bf16 weights widened exactly: every strategy starts from the same point.
    const std::vector<float> w = model_.weights_as_f32();
    backend_.copy_to_device(master_, w.data() + begin_, n * sizeof(float));
  } else if (strategy_.rule.master == MasterKind::kRem16) {
    backend_.fill_zero(master_, n * 2);  // weight == RN(master) exactly, remainder 0
  }
  if (kahan_) backend_.fill_zero(kahan_, n * 2);
}

AdamWBuffers Optimizer::buffers_at(size_t at) const {
  const AdamWArrayBytes eb = adamw_array_bytes(strategy_.rule);
  const size_t k = at - begin_;  // into the optimizer's own arrays
  const auto advance = [](void* p, size_t bytes) {
    return p ? static_cast<void*>(static_cast<char*>(p) + bytes) : nullptr;
  };
  AdamWBuffers buf{};
  buf.weights = advance(model_.weights(), at * eb.weights);
  buf.grads = advance(model_.grads(), at * eb.grads);
  buf.master = advance(master_, k * eb.master);
  buf.m = advance(m_, k * eb.m);
  buf.v = advance(v_, k * eb.v);
  buf.kahan = advance(kahan_, k * eb.kahan);
  return buf;
}

void Optimizer::step(uint64_t step, float lr, const AdamWSettings& s, const GradClip* clip,
                     AdamWTelemetry* telemetry) {
  if (step == 0) throw std::invalid_argument("optimizer step is 1-based");
  const AdamWHyper h = make_adamw_hyper(step, lr, s, /*grad_scale=*/1.0f, seed_);
  if (telemetry == nullptr) {
    backend_.adamw_step(*plan_, strategy_.rule, buffers_at(begin_), h, clip, nullptr);
    return;
  }
  // Slots of ranges outside this optimizer's part stay zero.
  backend_.fill_zero(telemetry, telemetry_slots_ * sizeof(AdamWTelemetry));
  for (const RangePlan& p : range_plans_) {
    backend_.adamw_step(*p.plan, strategy_.rule, buffers_at(p.begin), h, clip, telemetry + p.slot);
  }
}

std::vector<Optimizer::StateBuffer> Optimizer::state_buffers() const {
  const size_t n = end_ - begin_;
  std::vector<StateBuffer> out;
  const AdamWRule& r = strategy_.rule;
  if (r.master == MasterKind::kF32) out.push_back({"master", "F32", master_, n * 4});
  if (r.master == MasterKind::kRem16) out.push_back({"master_rem16", "I16", master_, n * 2});
  auto st = [](DType d) { return d == DType::kF32 ? "F32" : "BF16"; };
  out.push_back({"adam_m", st(r.m), m_, n * dtype_size(r.m)});
  out.push_back({"adam_v", st(r.v), v_, n * dtype_size(r.v)});
  if (kahan_) out.push_back({"kahan_c", "BF16", kahan_, n * 2});
  return out;
}

}  // namespace srkit

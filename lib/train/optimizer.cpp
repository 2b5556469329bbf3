#include "lib/train/optimizer.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace srkit {

AdamWHyper make_adamw_hyper(uint64_t step, float lr, const AdamWSettings& s, float grad_scale,
                            uint64_t seed) {
  AdamWHyper h{};
  h.lr = lr;
  h.beta1 = s.beta1;
  h.beta2 = s.beta2;
  h.eps = s.eps;
  h.weight_decay = s.weight_decay;
  h.bias_correction1 = float(1.0 - std::pow(double(s.beta1), double(step)));
  h.bias_correction2 = float(1.0 - std::pow(double(s.beta2), double(step)));
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
  plan_ = backend_.prepare_adamw(model.layout().segments(), begin_, end_);
  reset_master_from_weights();
}

Optimizer::~Optimizer() {
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

void Optimizer::step(uint64_t step, float lr, const AdamWSettings& s, const GradClip* clip,
                     AdamWTelemetry* telemetry) {
  if (step == 0) throw std::invalid_argument("optimizer step is 1-based");
  const AdamWHyper h = make_adamw_hyper(step, lr, s, /*grad_scale=*/1.0f, seed_);
  const size_t es = dtype_size(model_.dtype());
  AdamWBuffers buf{};
  buf.weights = static_cast<char*>(model_.weights()) + begin_ * es;
  buf.grads = static_cast<char*>(model_.grads()) + begin_ * es;
  buf.master = master_;
  buf.m = m_;
  buf.v = v_;
  buf.kahan = kahan_;
  backend_.adamw_step(*plan_, strategy_.rule, buf, h, clip, telemetry);
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

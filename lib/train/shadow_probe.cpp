#include "lib/train/shadow_probe.h"

#include <cmath>
#include <cstring>
#include <stdexcept>

#include "kernels/common/sr_bits.h"

namespace srkit {
namespace {

float load(const void* p, size_t elem_bytes) {
  if (elem_bytes == sizeof(bf16)) {
    bf16 h;
    std::memcpy(&h, p, sizeof h);
    return bf16_to_float(h);
  }
  float f;
  std::memcpy(&f, p, sizeof f);
  return f;
}

// The storage format's spacing at x: bf16 or fp32 (2^-23 of x's power of two).
double storage_ulp(float x, bool is_bf16) {
  if (is_bf16) return bf16_ulp(x);
  const double spacing = std::nextafter(std::fabs(x), INFINITY) - std::fabs(x);
  return spacing;
}

}  // namespace

ShadowProbe::ShadowProbe(Backend& backend, const ParamLayout& layout, int k, uint64_t seed,
                         size_t begin, size_t end)
    : backend_(backend) {
  if (k < 1) throw std::invalid_argument("--shadow-fp32: the sample count must be at least 1");
  // Tensors (or their parts) inside [begin, end).
  struct Part {
    size_t first, count;
    bool decay;
  };
  std::vector<Part> parts;
  for (const ParamTensor& t : layout.tensors()) {
    const size_t lo = std::max(t.offset, begin), hi = std::min(t.offset + t.count, end);
    if (lo < hi) parts.push_back({lo, hi - lo, t.decay});
  }
  if (parts.empty()) {
    throw std::invalid_argument("--shadow-fp32: the optimizer's range holds no parameter");
  }
  for (int j = 0; j < k; ++j) {
    const Part& p = parts[size_t(j) % parts.size()];
    const Philox4 r = sr_block(seed, RngPurpose::kShadowSample, 0, uint64_t(j));
    const uint64_t draw = (uint64_t(r.v[1]) << 32) | r.v[0];
    index_.push_back(p.first + size_t(draw % p.count));
    decay_.push_back(p.decay);
  }
  // The samples' global indices (weights, gradients), then their offsets in the
  // optimizer's range (its shard-local state).
  std::vector<uint64_t> both(2 * index_.size());
  for (size_t j = 0; j < index_.size(); ++j) {
    both[j] = index_[j];
    both[index_.size() + j] = index_[j] - begin;
  }
  device_index_ = static_cast<uint64_t*>(
      backend_.allocate(both.size() * sizeof(uint64_t), MemCategory::kScratch));
  device_values_ = backend_.allocate(index_.size() * sizeof(float), MemCategory::kScratch);
  backend_.copy_to_device(device_index_, both.data(), both.size() * sizeof(uint64_t));
}

ShadowProbe::~ShadowProbe() {
  backend_.release(device_values_);
  backend_.release(device_index_);
}

std::vector<float> ShadowProbe::read(const void* base, size_t elem_bytes, bool shard_local) const {
  const size_t k = index_.size();
  backend_.gather(device_values_, base, elem_bytes, device_index_ + (shard_local ? k : 0), k);
  std::vector<char> raw(k * elem_bytes);
  backend_.copy_to_host(raw.data(), device_values_, raw.size());
  std::vector<float> out(k);
  for (size_t j = 0; j < k; ++j) out[j] = load(raw.data() + j * elem_bytes, elem_bytes);
  return out;
}

void ShadowProbe::init(GPT& model, const Optimizer& optimizer) {
  const size_t es = dtype_size(model.dtype());
  w_ = read(model.weights(), es, false);
  m_.assign(index_.size(), 0.0f);
  v_.assign(index_.size(), 0.0f);
  for (const Optimizer::StateBuffer& b : optimizer.state_buffers()) {
    std::vector<float>* dst = b.name == "adam_m" ? &m_ : b.name == "adam_v" ? &v_ : nullptr;
    if (dst && b.data) *dst = read(b.data, b.dtype == "BF16" ? 2 : 4, true);
  }
}

void ShadowProbe::update(GPT& model, uint64_t step, float lr, const AdamWSettings& s,
                         float clip_scale) {
  // The probe rounds nothing, so the SR seed is irrelevant here.
  const AdamWHyper h = make_adamw_hyper(step, lr, s, clip_scale, /*seed=*/0);
  const std::vector<float> g = read(model.grads(), dtype_size(model.grad_dtype()), false);
  for (size_t j = 0; j < index_.size(); ++j) {
    const AdamWMath a = adamw_math(g[j], m_[j], v_[j], w_[j], decay_[j], h);
    m_[j] = a.m;
    v_[j] = a.v;
    w_[j] = w_[j] + a.update;
  }
}

ShadowDrift ShadowProbe::drift(GPT& model) const {
  const bool is_bf16 = model.dtype() == DType::kBF16;
  const std::vector<float> w = read(model.weights(), dtype_size(model.dtype()), false);
  ShadowDrift d;
  double diff_sq = 0, shadow_sq = 0;
  for (size_t j = 0; j < index_.size(); ++j) {
    const double diff = double(w[j]) - double(w_[j]);
    const double ulps = std::fabs(diff) / storage_ulp(w_[j], is_bf16);
    d.mean_abs_ulps += ulps;
    d.max_abs_ulps = std::max(d.max_abs_ulps, ulps);
    diff_sq += diff * diff;
    shadow_sq += double(w_[j]) * double(w_[j]);
  }
  d.mean_abs_ulps /= double(index_.size());
  d.rel_drift = shadow_sq > 0 ? std::sqrt(diff_sq / shadow_sq) : std::sqrt(diff_sq);
  return d;
}

nlohmann::json ShadowProbe::log_line(GPT& model, uint64_t step) const {
  const ShadowDrift d = drift(model);
  return {{"type", "shadow"},
          {"step", step},
          {"mean_abs_ulps", d.mean_abs_ulps},
          {"max_abs_ulps", d.max_abs_ulps},
          {"rel_drift", d.rel_drift},
          {"k", index_.size()}};
}

}  // namespace srkit

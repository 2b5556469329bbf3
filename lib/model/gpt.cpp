#include "lib/model/gpt.h"

#include <cmath>
#include <stdexcept>
#include <string>

#include "kernels/common/bf16.h"
#include "kernels/common/philox.h"
#include "lib/profiling.h"

namespace srkit {

// Saved forward activations (per-layer tensors stacked on a leading L axis)
// and the backward pass's scratch, all in the model dtype except the fp32
// LayerNorm statistics and losses.
struct GPT::Acts {
  void* encoded;    // [B,T,C]
  void* ln1;        // [L,B,T,C]
  float* ln1_mean;  // [L,B,T]
  float* ln1_rstd;
  void* qkv;      // [L,B,T,3C]
  void* atty;     // [L,B,T,C]
  void* preatt;   // [B,NH,T,T], shared by all layers (backward needs only att)
  void* att;      // [L,B,NH,T,T]
  void* attproj;  // [L,B,T,C]
  void* residual2;
  void* ln2;
  float* ln2_mean;
  float* ln2_rstd;
  void* fch;  // [L,B,T,4C]
  void* fch_gelu;
  void* fcproj;     // [L,B,T,C]
  void* residual3;  // [L,B,T,C]
  void* lnf;        // [B,T,C]
  float* lnf_mean;
  float* lnf_rstd;
  void* logits;  // [B,T,Vp]
  float* losses;
  int32_t* inputs;
  int32_t* targets;
  // backward scratch
  void* dresidual;         // [B,T,C]
  void* dln;               // [B,T,C]
  void* datty;             // [B,T,C]
  void* dqkv;              // [B,T,3C]
  void* dfch;              // [B,T,4C]
  void* dfch_gelu;         // [B,T,4C]
  void* dpreatt;           // [B,NH,T,T]
  void* datt;              // [B,NH,T,T]
  std::vector<void*> all;  // every allocation, for release
};

GPT::GPT(Backend& backend, const GPTConfig& config, DType dtype)
    : backend_(backend), config_(config), layout_(config), dtype_(dtype) {
  config_.validate();
  const size_t bytes = layout_.total_size() * dtype_size(dtype_);
  weights_ = backend_.allocate(bytes, MemCategory::kWeights);
  grads_ = backend_.allocate(bytes, MemCategory::kGrads);
}

GPT::~GPT() {
  free_activations();
  backend_.release(grads_);
  backend_.release(weights_);
}

void* GPT::at(void* base, size_t elements) const {
  return static_cast<char*>(base) + elements * dtype_size(dtype_);
}

void* GPT::param(const char* name, int layer) {
  const ParamTensor& t = layout_.get(name);
  const size_t per_layer = layer < 0 ? 0 : t.count / size_t(config_.num_layers);
  return at(weights_, t.offset + size_t(layer < 0 ? 0 : layer) * per_layer);
}

void* GPT::grad(const char* name, int layer) {
  const ParamTensor& t = layout_.get(name);
  const size_t per_layer = layer < 0 ? 0 : t.count / size_t(config_.num_layers);
  return at(grads_, t.offset + size_t(layer < 0 ? 0 : layer) * per_layer);
}

// ---- initialisation ----------------------------------------------------------

namespace {
constexpr uint32_t kInitPurpose = 0x494e4954;  // "INIT": never collides with SR purposes

// Standard normal for flat element i: Box-Muller on two 32-bit uniforms of one
// Philox call keyed by the seed; a pure function of (seed, i).
float init_normal(uint64_t seed, uint64_t i) {
  const Philox4 r = philox4x32_10(uint32_t(i), uint32_t(i >> 32), kInitPurpose, 0, uint32_t(seed),
                                  uint32_t(seed >> 32));
  const double u1 = (double(r.v[0]) + 1.0) / 4294967296.0;  // (0, 1]
  const double u2 = double(r.v[1]) / 4294967296.0;
  return float(std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2));
}

float round_to(DType dt, float x) {
  return dt == DType::kF32 ? x : bf16_to_float(float_to_bf16_rn(x));
}
}  // namespace

std::vector<float> GPT::init_weights(uint64_t seed) {
  std::vector<float> w(layout_.total_size(), 0.0f);
  const float residual_std = 0.02f / std::sqrt(2.0f * float(config_.num_layers));
  const size_t C = size_t(config_.channels);
  for (const ParamTensor& t : layout_.tensors()) {
    const bool is_bias = t.name.ends_with(".bias");
    const bool is_ln_gain = t.name.starts_with("h.ln_") || t.name.starts_with("ln_f");
    if (is_bias) continue;
    if (is_ln_gain) {
      for (size_t i = 0; i < t.count; ++i) w[t.offset + i] = 1.0f;
      continue;
    }
    const bool residual_proj = t.name.find("c_proj.weight") != std::string::npos;
    const float std = residual_proj ? residual_std : 0.02f;
    // Padded vocabulary rows of wte stay zero: they are never looked up or predicted.
    const size_t count = t.name == "wte" ? size_t(config_.vocab_size) * C : t.count;
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < count; ++i) {
      w[t.offset + i] = round_to(dtype_, std * init_normal(seed, t.offset + i));
    }
  }
  set_weights_from_f32(w);
  return w;
}

std::vector<float> GPT::weights_as_f32() {
  const size_t n = layout_.total_size();
  std::vector<float> out(n);
  if (dtype_ == DType::kF32) {
    backend_.copy_to_host(out.data(), weights_, n * sizeof(float));
  } else {
    std::vector<bf16> tmp(n);
    backend_.copy_to_host(tmp.data(), weights_, n * sizeof(bf16));
    for (size_t i = 0; i < n; ++i) out[i] = bf16_to_float(tmp[i]);
  }
  return out;
}

void GPT::set_weights_from_f32(const std::vector<float>& values) {
  const size_t n = layout_.total_size();
  if (values.size() != n) throw std::invalid_argument("set_weights_from_f32: size mismatch");
  if (dtype_ == DType::kF32) {
    backend_.copy_to_device(weights_, values.data(), n * sizeof(float));
  } else {
    std::vector<bf16> tmp(n);
    for (size_t i = 0; i < n; ++i) tmp[i] = float_to_bf16_rn(values[i]);
    backend_.copy_to_device(weights_, tmp.data(), n * sizeof(bf16));
  }
}

// ---- activations -------------------------------------------------------------

void GPT::free_activations() {
  if (!acts_) return;
  for (void* p : acts_->all) backend_.release(p);
  delete acts_;
  acts_ = nullptr;
  cap_B_ = cap_T_ = 0;
}

void GPT::bind_activations(Acts& a, const GPTConfig& config, DType dtype, int B, int T,
                           const std::function<void*(const ActivationBuffer&)>& alloc) {
  const size_t L = config.num_layers, C = config.channels, NH = config.num_heads;
  const size_t Vp = config.padded_vocab_size();
  const size_t BT = size_t(B) * T, att = size_t(B) * NH * T * T;
  const size_t es = dtype_size(dtype);
  const int layers = config.num_layers;
  // model(): in the model dtype; f32(): fp32 statistics, losses and int32 token ids.
  auto model = [&](const char* name, size_t elements, int stacked) {
    return alloc(ActivationBuffer{name, elements * es, stacked});
  };
  auto f32 = [&](const char* name, size_t elements, int stacked) {
    return static_cast<float*>(alloc(ActivationBuffer{name, elements * sizeof(float), stacked}));
  };
  a.encoded = model("encoded", BT * C, 1);
  a.ln1 = model("ln1", L * BT * C, layers);
  a.ln1_mean = f32("ln1_mean", L * BT, layers);
  a.ln1_rstd = f32("ln1_rstd", L * BT, layers);
  a.qkv = model("qkv", L * BT * 3 * C, layers);
  a.atty = model("atty", L * BT * C, layers);
  a.preatt = model("preatt", att, 1);
  a.att = model("att", L * att, layers);
  a.attproj = model("attproj", L * BT * C, layers);
  a.residual2 = model("residual2", L * BT * C, layers);
  a.ln2 = model("ln2", L * BT * C, layers);
  a.ln2_mean = f32("ln2_mean", L * BT, layers);
  a.ln2_rstd = f32("ln2_rstd", L * BT, layers);
  a.fch = model("fch", L * BT * 4 * C, layers);
  a.fch_gelu = model("fch_gelu", L * BT * 4 * C, layers);
  a.fcproj = model("fcproj", L * BT * C, layers);
  a.residual3 = model("residual3", L * BT * C, layers);
  a.lnf = model("lnf", BT * C, 1);
  a.lnf_mean = f32("lnf_mean", BT, 1);
  a.lnf_rstd = f32("lnf_rstd", BT, 1);
  a.logits = model("logits", BT * Vp, 1);
  a.losses = f32("losses", BT, 1);
  a.inputs = reinterpret_cast<int32_t*>(f32("inputs", BT, 1));
  a.targets = reinterpret_cast<int32_t*>(f32("targets", BT, 1));
  a.dresidual = model("dresidual", BT * C, 1);
  a.dln = model("dln", BT * C, 1);
  a.datty = model("datty", BT * C, 1);
  a.dqkv = model("dqkv", BT * 3 * C, 1);
  a.dfch = model("dfch", BT * 4 * C, 1);
  a.dfch_gelu = model("dfch_gelu", BT * 4 * C, 1);
  a.dpreatt = model("dpreatt", att, 1);
  a.datt = model("datt", att, 1);
}

std::vector<ActivationBuffer> GPT::activation_buffers(const GPTConfig& config, DType dtype, int B,
                                                      int T) {
  std::vector<ActivationBuffer> out;
  Acts unbound;
  bind_activations(unbound, config, dtype, B, T, [&](const ActivationBuffer& b) -> void* {
    out.push_back(b);
    return nullptr;
  });
  return out;
}

size_t GPT::activation_bytes(const GPTConfig& config, DType dtype, int B, int T) {
  size_t total = 0;
  for (const ActivationBuffer& b : activation_buffers(config, dtype, B, T)) total += b.bytes;
  return total;
}

void GPT::ensure_activations(int B, int T) {
  if (T > config_.max_seq_len) {
    throw std::invalid_argument("sequence length " + std::to_string(T) +
                                " exceeds the model's maximum " +
                                std::to_string(config_.max_seq_len));
  }
  if (acts_ && B <= cap_B_ && T <= cap_T_) return;
  free_activations();
  acts_ = new Acts();
  bind_activations(*acts_, config_, dtype_, B, T, [&](const ActivationBuffer& b) {
    void* p = backend_.allocate(b.bytes, MemCategory::kActivations);
    acts_->all.push_back(p);
    return p;
  });
  cap_B_ = B;
  cap_T_ = T;
}

// ---- forward -----------------------------------------------------------------

float GPT::forward(const int32_t* inputs, const int32_t* targets, int B, int T) {
  ScopedPhase phase(timers_, "forward");
  if (B < 1 || T < 1)
    throw std::invalid_argument("forward: batch and sequence length must be >= 1");
  ensure_activations(B, T);
  B_ = B;
  T_ = T;
  const int L = config_.num_layers, C = config_.channels, NH = config_.num_heads;
  const int V = config_.vocab_size, Vp = config_.padded_vocab_size();
  const size_t BT = size_t(B) * T, att = size_t(B) * NH * T * T;
  const DType dt = dtype_;
  Acts& a = *acts_;
  for (size_t i = 0; i < BT; ++i) {
    if (inputs[i] < 0 || inputs[i] >= V) {
      throw std::invalid_argument("token " + std::to_string(inputs[i]) +
                                  " outside the model's vocabulary [0, " + std::to_string(V) + ")");
    }
  }
  backend_.copy_to_device(a.inputs, inputs, BT * sizeof(int32_t));

  backend_.encoder_forward(dt, a.encoded, a.inputs, param("wte"), param("wpe"), B, T, C);
  for (int l = 0; l < L; ++l) {
    const void* residual = l == 0 ? a.encoded : at(a.residual3, (l - 1) * BT * C);
    void* ln1 = at(a.ln1, l * BT * C);
    float* ln1_mean = a.ln1_mean + l * BT;
    float* ln1_rstd = a.ln1_rstd + l * BT;
    void* qkv = at(a.qkv, l * BT * 3 * C);
    void* atty = at(a.atty, l * BT * C);
    void* attl = at(a.att, l * att);
    void* attproj = at(a.attproj, l * BT * C);
    void* residual2 = at(a.residual2, l * BT * C);
    void* ln2 = at(a.ln2, l * BT * C);
    float* ln2_mean = a.ln2_mean + l * BT;
    float* ln2_rstd = a.ln2_rstd + l * BT;
    void* fch = at(a.fch, l * BT * 4 * C);
    void* fch_gelu = at(a.fch_gelu, l * BT * 4 * C);
    void* fcproj = at(a.fcproj, l * BT * C);
    void* residual3 = at(a.residual3, l * BT * C);

    backend_.layernorm_forward(dt, ln1, ln1_mean, ln1_rstd, residual, param("h.ln_1.weight", l),
                               param("h.ln_1.bias", l), int(BT), C);
    backend_.matmul_forward(dt, qkv, ln1, param("h.attn.c_attn.weight", l),
                            param("h.attn.c_attn.bias", l), int(BT), C, 3 * C);
    backend_.attention_forward(dt, atty, a.preatt, attl, qkv, B, T, C, NH);
    backend_.matmul_forward(dt, attproj, atty, param("h.attn.c_proj.weight", l),
                            param("h.attn.c_proj.bias", l), int(BT), C, C);
    backend_.residual_forward(dt, residual2, residual, attproj, BT * C);
    backend_.layernorm_forward(dt, ln2, ln2_mean, ln2_rstd, residual2, param("h.ln_2.weight", l),
                               param("h.ln_2.bias", l), int(BT), C);
    backend_.matmul_forward(dt, fch, ln2, param("h.mlp.c_fc.weight", l),
                            param("h.mlp.c_fc.bias", l), int(BT), C, 4 * C);
    backend_.gelu_forward(dt, fch_gelu, fch, BT * 4 * C);
    backend_.matmul_forward(dt, fcproj, fch_gelu, param("h.mlp.c_proj.weight", l),
                            param("h.mlp.c_proj.bias", l), int(BT), 4 * C, C);
    backend_.residual_forward(dt, residual3, residual2, fcproj, BT * C);
  }
  const void* last = at(a.residual3, (L - 1) * BT * C);
  backend_.layernorm_forward(dt, a.lnf, a.lnf_mean, a.lnf_rstd, last, param("ln_f.weight"),
                             param("ln_f.bias"), int(BT), C);
  backend_.matmul_forward(dt, a.logits, a.lnf, param("wte"), nullptr, int(BT), C, Vp);

  valid_targets_ = 0;
  if (targets == nullptr) return 0.0f;
  for (size_t i = 0; i < BT; ++i) {
    if (targets[i] >= V) {
      throw std::invalid_argument("target token " + std::to_string(targets[i]) +
                                  " outside the model's vocabulary [0, " + std::to_string(V) + ")");
    }
    if (targets[i] >= 0) ++valid_targets_;
  }
  backend_.copy_to_device(a.targets, targets, BT * sizeof(int32_t));
  backend_.crossentropy_forward(dt, a.losses, a.logits, a.targets, int(BT), V, Vp);
  std::vector<float> losses(BT);
  backend_.copy_to_host(losses.data(), a.losses, BT * sizeof(float));
  double sum = 0.0;  // in order: the same bits for any thread count
  for (size_t i = 0; i < BT; ++i) sum += targets[i] >= 0 ? losses[i] : 0.0f;
  return valid_targets_ > 0 ? float(sum / valid_targets_) : 0.0f;
}

std::vector<float> GPT::logits(int b, int t) {
  if (!acts_ || b >= B_ || t >= T_) throw std::logic_error("logits: no such position");
  const size_t Vp = config_.padded_vocab_size(), V = config_.vocab_size;
  const size_t row = (size_t(b) * T_ + t) * Vp;
  std::vector<float> out(V);
  if (dtype_ == DType::kF32) {
    backend_.copy_to_host(out.data(), at(acts_->logits, row), V * sizeof(float));
  } else {
    std::vector<bf16> tmp(V);
    backend_.copy_to_host(tmp.data(), at(acts_->logits, row), V * sizeof(bf16));
    for (size_t i = 0; i < V; ++i) out[i] = bf16_to_float(tmp[i]);
  }
  return out;
}

// ---- backward ----------------------------------------------------------------

void GPT::zero_grads() { backend_.fill_zero(grads_, weight_bytes()); }

void GPT::backward(float loss_scale) {
  ScopedPhase phase(timers_, "backward");
  if (!acts_ || valid_targets_ == 0) {
    throw std::logic_error("backward: needs a forward with targets first");
  }
  const int B = B_, T = T_;
  const int L = config_.num_layers, C = config_.channels, NH = config_.num_heads;
  const int V = config_.vocab_size, Vp = config_.padded_vocab_size();
  const size_t BT = size_t(B) * T, att = size_t(B) * NH * T * T;
  const size_t es = dtype_size(dtype_);
  const DType dt = dtype_;
  Acts& a = *acts_;

  // d(mean loss)/d(logits) = softmax - onehot, scaled by 1/valid targets, written
  // over the logits (as llm.c does): the [B,T,Vp] buffer is the largest one.
  void* dlogits = a.logits;
  backend_.crossentropy_backward(dt, dlogits, a.logits, a.targets,
                                 loss_scale / float(valid_targets_), int(BT), V, Vp);
  valid_targets_ = 0;  // the logits are gone: a second backward needs a new forward
  backend_.fill_zero(a.dln, BT * C * es);
  backend_.matmul_backward(dt, a.dln, grad("wte"), nullptr, dlogits, a.lnf, param("wte"), int(BT),
                           C, Vp);
  // dresidual carries the gradient of the residual stream down through the layers.
  backend_.fill_zero(a.dresidual, BT * C * es);
  const void* last = at(a.residual3, (L - 1) * BT * C);
  backend_.layernorm_backward(dt, a.dresidual, grad("ln_f.weight"), grad("ln_f.bias"), a.dln, last,
                              param("ln_f.weight"), a.lnf_mean, a.lnf_rstd, int(BT), C);

  for (int l = L - 1; l >= 0; --l) {
    const void* residual = l == 0 ? a.encoded : at(a.residual3, (l - 1) * BT * C);
    const void* ln1 = at(a.ln1, l * BT * C);
    const void* qkv = at(a.qkv, l * BT * 3 * C);
    const void* atty = at(a.atty, l * BT * C);
    const void* attl = at(a.att, l * att);
    const void* residual2 = at(a.residual2, l * BT * C);
    const void* ln2 = at(a.ln2, l * BT * C);
    const void* fch = at(a.fch, l * BT * 4 * C);
    const void* fch_gelu = at(a.fch_gelu, l * BT * 4 * C);

    // residual3 = residual2 + fcproj: both receive dresidual unchanged, so the
    // MLP branch reads dresidual as d(fcproj) and its LayerNorm adds into it.
    backend_.fill_zero(a.dfch_gelu, BT * 4 * C * es);
    backend_.matmul_backward(dt, a.dfch_gelu, grad("h.mlp.c_proj.weight", l),
                             grad("h.mlp.c_proj.bias", l), a.dresidual, fch_gelu,
                             param("h.mlp.c_proj.weight", l), int(BT), 4 * C, C);
    backend_.fill_zero(a.dfch, BT * 4 * C * es);
    backend_.gelu_backward(dt, a.dfch, fch, a.dfch_gelu, BT * 4 * C);
    backend_.fill_zero(a.dln, BT * C * es);
    backend_.matmul_backward(dt, a.dln, grad("h.mlp.c_fc.weight", l), grad("h.mlp.c_fc.bias", l),
                             a.dfch, ln2, param("h.mlp.c_fc.weight", l), int(BT), C, 4 * C);
    backend_.layernorm_backward(dt, a.dresidual, grad("h.ln_2.weight", l), grad("h.ln_2.bias", l),
                                a.dln, residual2, param("h.ln_2.weight", l), a.ln2_mean + l * BT,
                                a.ln2_rstd + l * BT, int(BT), C);
    // residual2 = residual + attproj: the same pattern for the attention branch.
    backend_.fill_zero(a.datty, BT * C * es);
    backend_.matmul_backward(dt, a.datty, grad("h.attn.c_proj.weight", l),
                             grad("h.attn.c_proj.bias", l), a.dresidual, atty,
                             param("h.attn.c_proj.weight", l), int(BT), C, C);
    backend_.fill_zero(a.dqkv, BT * 3 * C * es);
    backend_.attention_backward(dt, a.dqkv, a.dpreatt, a.datt, a.datty, qkv, attl, B, T, C, NH);
    backend_.fill_zero(a.dln, BT * C * es);
    backend_.matmul_backward(dt, a.dln, grad("h.attn.c_attn.weight", l),
                             grad("h.attn.c_attn.bias", l), a.dqkv, ln1,
                             param("h.attn.c_attn.weight", l), int(BT), C, 3 * C);
    backend_.layernorm_backward(dt, a.dresidual, grad("h.ln_1.weight", l), grad("h.ln_1.bias", l),
                                a.dln, residual, param("h.ln_1.weight", l), a.ln1_mean + l * BT,
                                a.ln1_rstd + l * BT, int(BT), C);
  }
  backend_.encoder_backward(dt, grad("wte"), grad("wpe"), a.dresidual, a.inputs, B, T, C);
}

}  // namespace srkit

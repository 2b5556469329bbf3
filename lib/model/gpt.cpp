#include "lib/model/gpt.h"

#include <cmath>
#include <stdexcept>
#include <string>

#include "kernels/common/bf16.h"
#include "kernels/common/sr_bits.h"
#include "lib/profiling.h"

namespace srkit {

// Saved forward activations (per-layer tensors stacked on a leading L axis),
// what attention keeps, and the backward pass's scratch, all in the model dtype
// except the fp32 LayerNorm statistics and losses.
struct GPT::Acts {
  void* encoded;    // [B,T,C]
  void* ln1;        // [L,B,T,C]
  float* ln1_mean;  // [L,B,T]
  float* ln1_rstd;
  void* qkv;          // [L,B,T,3C]
  void* atty;         // [L,B,T,C]
  void* att_state;    // [L, attention_sizes().state_per_layer bytes]
  void* att_scratch;  // attention_sizes().scratch bytes, shared by the layers (may be null)
  void* proj;         // [B,T,C]: each projection's output, consumed by the residual add
  void* residual2;    // [L,B,T,C]
  void* ln2;
  float* ln2_mean;
  float* ln2_rstd;
  void* fch;  // [L,B,T,4C], before GELU
  void* fch_gelu;
  void* residual3;  // [L,B,T,C]
  void* lnf;        // [B,T,C]
  float* lnf_mean;
  float* lnf_rstd;
  void* logits;  // [B,T,Vp]; dlogits in place after the classifier
  float* losses;
  double* loss;  // the synchronous forward's mean loss
  int32_t* inputs;
  int32_t* targets;
  // backward scratch
  void* dresidual;         // [B,T,C]
  void* dln;               // [B,T,C]
  void* datty;             // [B,T,C]
  void* dqkv;              // [B,T,3C]
  void* dfch;              // [B,T,4C]
  void* dfch_gelu;         // [B,T,4C]
  size_t att_state_bytes;  // per layer
  std::vector<void*> all;  // every allocation, for release
};

GPT::GPT(Backend& backend, const GPTConfig& config, DType dtype)
    : GPT(backend, config, dtype, dtype) {}

GPT::GPT(Backend& backend, const GPTConfig& config, DType dtype, DType compute)
    : GPT(backend, config, dtype, compute, dtype) {}

GPT::GPT(Backend& backend, const GPTConfig& config, DType dtype, DType compute, DType grads)
    : backend_(backend),
      config_(config),
      layout_(config),
      dtype_(dtype),
      compute_(compute),
      grads_dtype_(grads),
      param_grad_dt_(compute != dtype ? compute : grads) {
  config_.validate();
  if (grads != dtype && (grads != DType::kF32 || compute != dtype)) {
    throw std::invalid_argument(std::string("GPT: ") + dtype_name(grads) + " gradients with " +
                                dtype_name(dtype) + " weights and " + dtype_name(compute) +
                                " compute (expected the weights' dtype, or f32 with bf16 weights "
                                "computed in bf16)");
  }
  const size_t n = layout_.total_size();
  weights_ = backend_.allocate(n * dtype_size(dtype_), MemCategory::kWeights);
  grads_ = backend_.allocate(grad_bytes(), MemCategory::kGrads);
  compute_weights_ = weights_;
  compute_grads_ = grads_;
  if (compute_ != dtype_) {
    compute_weights_ = backend_.allocate(n * dtype_size(compute_), MemCategory::kScratch);
    compute_grads_ = backend_.allocate(n * dtype_size(compute_), MemCategory::kScratch);
  }
  w_ = ParamViews::of(layout_, config_.num_layers, compute_weights_, compute_);
  g_ = ParamViews::of(layout_, config_.num_layers, compute_grads_, param_grad_dt_);
}

GPT::~GPT() {
  free_activations();
  if (compute_ != dtype_) {
    backend_.release(compute_grads_);
    backend_.release(compute_weights_);
  }
  backend_.release(grads_);
  backend_.release(weights_);
}

// Activation offsets: activations are compute-typed.
void* GPT::at(void* base, size_t elements) const {
  return static_cast<char*>(base) + elements * dtype_size(compute_);
}

// ---- initialisation ----------------------------------------------------------

namespace {
// Standard normal for flat element i: Box-Muller on two 32-bit uniforms of the
// contract's block i of stream (seed, kInit, step 0); a pure function of (seed, i).
float init_normal(uint64_t seed, uint64_t i) {
  const Philox4 r = sr_block(seed, RngPurpose::kInit, 0, i);
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
    // Parallel: billions of parameters at the 6.7B presets.
#pragma omp parallel for schedule(static)
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
#pragma omp parallel for schedule(static)
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
                           DeviceKind device, bool recompute,
                           const std::function<void*(const ActivationBuffer&)>& alloc) {
  const size_t L = config.num_layers, C = config.channels;
  // Recomputed per-layer buffers: one layer's worth when recomputing.
  const size_t R = recompute ? 1 : L;
  const int recomputed_layers = recompute ? 1 : config.num_layers;
  const size_t Vp = config.padded_vocab_size();
  const size_t BT = size_t(B) * T;
  const size_t es = dtype_size(dtype);
  const int layers = config.num_layers;
  const AttentionSizes att =
      attention_sizes(device, dtype, B, T, config.channels, config.num_heads);
  // model(): in the model dtype; f32(): fp32 statistics, losses and int32 token
  // ids; bytes(): what the backend asked for.
  auto model = [&](const char* name, size_t elements, int stacked) {
    return alloc(ActivationBuffer{name, elements * es, stacked});
  };
  auto f32 = [&](const char* name, size_t elements, int stacked) {
    return static_cast<float*>(alloc(ActivationBuffer{name, elements * sizeof(float), stacked}));
  };
  auto bytes = [&](const char* name, size_t n, int stacked) {
    return n == 0 ? nullptr : alloc(ActivationBuffer{name, n, stacked});
  };
  a.encoded = model("encoded", BT * C, 1);
  a.ln1 = model("ln1", L * BT * C, layers);
  a.ln1_mean = f32("ln1_mean", L * BT, layers);
  a.ln1_rstd = f32("ln1_rstd", L * BT, layers);
  const int rl = recomputed_layers;
  a.qkv = model("qkv", R * BT * 3 * C, rl);
  a.atty = model("atty", R * BT * C, rl);
  a.att_state_bytes = att.state_per_layer;
  a.att_state = bytes("att_state", R * att.state_per_layer, rl);
  a.att_scratch = bytes("att_scratch", att.scratch, 1);
  a.proj = model("proj", BT * C, 1);
  a.residual2 = model("residual2", R * BT * C, rl);
  a.ln2 = model("ln2", R * BT * C, rl);
  a.ln2_mean = f32("ln2_mean", R * BT, rl);
  a.ln2_rstd = f32("ln2_rstd", R * BT, rl);
  a.fch = model("fch", R * BT * 4 * C, rl);
  a.fch_gelu = model("fch_gelu", R * BT * 4 * C, rl);
  a.residual3 = model("residual3", L * BT * C, layers);
  a.lnf = model("lnf", BT * C, 1);
  a.lnf_mean = f32("lnf_mean", BT, 1);
  a.lnf_rstd = f32("lnf_rstd", BT, 1);
  a.logits = model("logits", BT * Vp, 1);
  a.losses = f32("losses", BT, 1);
  a.loss = reinterpret_cast<double*>(f32("loss", 2, 1));
  a.inputs = reinterpret_cast<int32_t*>(f32("inputs", BT, 1));
  a.targets = reinterpret_cast<int32_t*>(f32("targets", BT, 1));
  a.dresidual = model("dresidual", BT * C, 1);
  a.dln = model("dln", BT * C, 1);
  a.datty = model("datty", BT * C, 1);
  a.dqkv = model("dqkv", BT * 3 * C, 1);
  a.dfch = model("dfch", BT * 4 * C, 1);
  a.dfch_gelu = model("dfch_gelu", BT * 4 * C, 1);
}

std::vector<ActivationBuffer> GPT::activation_buffers(const GPTConfig& config, DType dtype, int B,
                                                      int T, DeviceKind device, bool recompute) {
  std::vector<ActivationBuffer> out;
  Acts unbound;
  bind_activations(unbound, config, dtype, B, T, device, recompute,
                   [&](const ActivationBuffer& b) -> void* {
                     out.push_back(b);
                     return nullptr;
                   });
  return out;
}

size_t GPT::activation_bytes(const GPTConfig& config, DType dtype, int B, int T, DeviceKind device,
                             bool recompute) {
  size_t total = 0;
  for (const ActivationBuffer& b : activation_buffers(config, dtype, B, T, device, recompute)) {
    total += b.bytes;
  }
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
  bind_activations(*acts_, config_, compute_, B, T, backend_.kind(), recompute_,
                   [&](const ActivationBuffer& b) {
                     void* p = backend_.allocate(b.bytes, MemCategory::kActivations);
                     acts_->all.push_back(p);
                     return p;
                   });
  host_inputs_.reserve(size_t(B) * size_t(T));
  cap_B_ = B;
  cap_T_ = T;
}

// ---- forward -----------------------------------------------------------------

void GPT::load_batch(const int32_t* inputs, const int32_t* targets, int B, int T) {
  if (B < 1 || T < 1)
    throw std::invalid_argument("forward: batch and sequence length must be >= 1");
  ensure_activations(B, T);
  const int V = config_.vocab_size;
  const size_t BT = size_t(B) * T;
  for (size_t i = 0; i < BT; ++i) {
    if (inputs[i] < 0 || inputs[i] >= V) {
      throw std::invalid_argument("token " + std::to_string(inputs[i]) +
                                  " outside the model's vocabulary [0, " + std::to_string(V) + ")");
    }
  }
  int valid = 0;
  for (size_t i = 0; targets && i < BT; ++i) {
    if (targets[i] >= V) {
      throw std::invalid_argument("target token " + std::to_string(targets[i]) +
                                  " outside the model's vocabulary [0, " + std::to_string(V) + ")");
    }
    if (targets[i] >= 0) ++valid;
  }
  B_ = B;
  T_ = T;
  valid_targets_ = valid;
  host_inputs_.assign(inputs, inputs + BT);  // within the reserved capacity: no allocation
  backend_.copy_to_device(acts_->inputs, inputs, BT * sizeof(int32_t));
  if (targets) backend_.copy_to_device(acts_->targets, targets, BT * sizeof(int32_t));
}

void GPT::forward_to_logits() {
  const int B = B_, T = T_;
  const int L = config_.num_layers, C = config_.channels;
  const int Vp = config_.padded_vocab_size();
  const size_t BT = size_t(B) * T;
  const int N = int(BT);
  const DType dt = compute_;
  Acts& a = *acts_;
  if (compute_ != dtype_) {  // O1: this forward's compute copy of the weights
    backend_.convert(compute_, compute_weights_, dtype_, weights_, layout_.total_size());
  }

  backend_.encoder_forward(dt, a.encoded, a.inputs, w_.wte, w_.wpe, B, T, C);
  backend_.layernorm_forward(dt, a.ln1, a.ln1_mean, a.ln1_rstd, a.encoded, w_.layers[0].ln1_w,
                             w_.layers[0].ln1_b, N, C);
  for (int l = 0; l < L; ++l) layer_forward(l, true);
  backend_.matmul_forward(dt, a.logits, a.lnf, w_.wte, nullptr, N, C, Vp);
}

void GPT::layer_forward(int l, bool to_next) {
  const int B = B_, T = T_;
  const int L = config_.num_layers, C = config_.channels, NH = config_.num_heads;
  const size_t BT = size_t(B) * T;
  const int N = int(BT);
  const DType dt = compute_;
  Acts& a = *acts_;
  const LayerTensors& p = w_.layers[l];
  const size_t s = slot(l);
  const void* residual = l == 0 ? a.encoded : at(a.residual3, (l - 1) * BT * C);
  void* ln1 = at(a.ln1, l * BT * C);
  void* qkv = at(a.qkv, s * BT * 3 * C);
  void* atty = at(a.atty, s * BT * C);
  void* state = static_cast<char*>(a.att_state) + s * a.att_state_bytes;
  void* residual2 = at(a.residual2, s * BT * C);
  void* ln2 = at(a.ln2, s * BT * C);
  void* fch = at(a.fch, s * BT * 4 * C);
  void* fch_gelu = at(a.fch_gelu, s * BT * 4 * C);

  backend_.matmul_forward(dt, qkv, ln1, p.qkv_w, p.qkv_b, N, C, 3 * C);
  backend_.attention_forward(dt, atty, state, a.att_scratch, qkv, B, T, C, NH);
  backend_.matmul_forward(dt, a.proj, atty, p.attproj_w, p.attproj_b, N, C, C);
  backend_.residual_layernorm_forward(dt, residual2, ln2, a.ln2_mean + s * BT, a.ln2_rstd + s * BT,
                                      residual, a.proj, p.ln2_w, p.ln2_b, N, C);
  backend_.matmul_bias_gelu_forward(dt, fch_gelu, fch, ln2, p.fc_w, p.fc_b, N, C, 4 * C);
  if (!to_next) return;  // a recomputation: the layer's output is kept from the forward
  backend_.matmul_forward(dt, a.proj, fch_gelu, p.fcproj_w, p.fcproj_b, N, 4 * C, C);
  // residual3 = residual2 + the MLP's output, normalised at once for what
  // comes next: the next layer's ln1, or the final LayerNorm.
  const bool last = l + 1 == L;
  void* residual3 = at(a.residual3, l * BT * C);
  void* next_ln = last ? a.lnf : at(a.ln1, (l + 1) * BT * C);
  float* next_mean = last ? a.lnf_mean : a.ln1_mean + (l + 1) * BT;
  float* next_rstd = last ? a.lnf_rstd : a.ln1_rstd + (l + 1) * BT;
  const void* next_w = last ? w_.lnf_w : w_.layers[l + 1].ln1_w;
  const void* next_b = last ? w_.lnf_b : w_.layers[l + 1].ln1_b;
  backend_.residual_layernorm_forward(dt, residual3, next_ln, next_mean, next_rstd, residual2,
                                      a.proj, next_w, next_b, N, C);
}

void GPT::set_recompute(bool on) {
  if (on == recompute_) return;
  free_activations();
  recompute_ = on;
}

void GPT::forward(const int32_t* inputs, const int32_t* targets, int B, int T, double* loss) {
  ScopedPhase phase(timers_, "forward");
  load_batch(inputs, targets, B, T);
  forward_to_logits();
  have_dlogits_source_ = false;
  if (targets == nullptr) return;
  const int N = B * T;
  backend_.crossentropy_forward(compute_, acts_->losses, acts_->logits, acts_->targets, N,
                                config_.vocab_size, config_.padded_vocab_size());
  if (loss) backend_.mean_loss(acts_->losses, acts_->targets, N, valid_targets_, loss);
  have_dlogits_source_ = valid_targets_ > 0;
}

float GPT::forward(const int32_t* inputs, const int32_t* targets, int B, int T) {
  ensure_activations(B, T);
  forward(inputs, targets, B, T, targets ? acts_->loss : nullptr);
  if (targets == nullptr) return 0.0f;
  double loss = 0.0;
  backend_.copy_to_host(&loss, acts_->loss, sizeof loss);
  return float(loss);
}

std::vector<float> GPT::logits(int b, int t) {
  if (!acts_ || b >= B_ || t >= T_) throw std::logic_error("logits: no such position");
  const size_t Vp = config_.padded_vocab_size(), V = config_.vocab_size;
  const size_t row = (size_t(b) * T_ + t) * Vp;
  std::vector<float> out(V);
  if (compute_ == DType::kF32) {
    backend_.copy_to_host(out.data(), at(acts_->logits, row), V * sizeof(float));
  } else {
    std::vector<bf16> tmp(V);
    backend_.copy_to_host(tmp.data(), at(acts_->logits, row), V * sizeof(bf16));
    for (size_t i = 0; i < V; ++i) out[i] = bf16_to_float(tmp[i]);
  }
  return out;
}

// ---- backward ----------------------------------------------------------------

void GPT::zero_grads() {
  backend_.fill_zero(grads_, grad_bytes());
  if (compute_ != dtype_) {
    backend_.fill_zero(compute_grads_, layout_.total_size() * dtype_size(compute_));
  }
}

void GPT::backward(float loss_scale, GradWrite mode) {
  ScopedPhase phase(timers_, "backward");
  if (!acts_ || !have_dlogits_source_) {
    throw std::logic_error("backward: needs a forward with targets first");
  }
  // d(mean loss)/d(logits) = softmax - onehot, scaled by 1/valid targets, written
  // over the logits (as llm.c does): the [B,T,Vp] buffer is the largest one.
  backend_.crossentropy_backward(compute_, acts_->logits, acts_->logits, acts_->targets,
                                 loss_scale / float(valid_targets_), B_ * T_, config_.vocab_size,
                                 config_.padded_vocab_size());
  have_dlogits_source_ = false;  // the logits are gone: a second backward needs a new forward
  backward_from_dlogits(mode);
}

void GPT::forward_backward(const int32_t* inputs, const int32_t* targets, int B, int T,
                           float loss_scale, GradWrite mode, double* loss) {
  if (targets == nullptr) throw std::invalid_argument("forward_backward: targets are required");
  {
    ScopedPhase phase(timers_, "forward");
    load_batch(inputs, targets, B, T);
    if (valid_targets_ == 0) {
      throw std::invalid_argument("forward_backward: the batch has no target >= 0");
    }
    forward_to_logits();
    const int N = B * T;
    backend_.classifier(compute_, acts_->logits, acts_->losses, acts_->targets,
                        loss_scale / float(valid_targets_), N, config_.vocab_size,
                        config_.padded_vocab_size());
    if (loss) backend_.mean_loss(acts_->losses, acts_->targets, N, valid_targets_, loss);
    have_dlogits_source_ = false;
  }
  ScopedPhase phase(timers_, "backward");
  backward_from_dlogits(mode);
}

void GPT::backward_from_dlogits(GradWrite mode) {
  const int B = B_, T = T_;
  const int L = config_.num_layers, C = config_.channels, NH = config_.num_heads;
  const int Vp = config_.padded_vocab_size();
  const size_t BT = size_t(B) * T;
  const int N = int(BT);
  const DType dt = compute_, gt = param_grad_dt_;
  const GradWrite kWrite = GradWrite::kOverwrite, kAdd = GradWrite::kAccumulate;
  Acts& a = *acts_;

  // The tied embedding's gradient: the classifier's part first (it covers every
  // row), the encoder's added at the end. wpe's rows past T get no contribution,
  // so its gradient is cleared when a step's first micro-batch starts it.
  backend_.matmul_backward(dt, gt, a.dln, kWrite, g_.wte, nullptr, mode, a.logits, a.lnf, w_.wte, N,
                           C, Vp);
  if (mode == GradWrite::kOverwrite) {
    backend_.fill_zero(g_.wpe, size_t(config_.max_seq_len) * C * dtype_size(gt));
  }
  // dresidual carries the gradient of the residual stream down through the layers.
  const void* last = at(a.residual3, (L - 1) * BT * C);
  backend_.layernorm_backward(dt, gt, a.dresidual, kWrite, g_.lnf_w, g_.lnf_b, mode, a.dln, last,
                              w_.lnf_w, a.lnf_mean, a.lnf_rstd, N, C);

  for (int l = L - 1; l >= 0; --l) {
    ScopedPhase layer_phase(nullptr, "backward layer");  // an NVTX range per layer
    const LayerTensors& p = w_.layers[l];
    const LayerTensors& gp = g_.layers[l];
    // Recomputing, the one slot holds the last layer's activations from the
    // forward; every other layer's are recomputed from its kept input.
    if (recompute_ && l + 1 < L) layer_forward(l, false);
    const size_t s = slot(l);
    const void* residual = l == 0 ? a.encoded : at(a.residual3, (l - 1) * BT * C);
    const void* ln1 = at(a.ln1, l * BT * C);
    const void* qkv = at(a.qkv, s * BT * 3 * C);
    const void* atty = at(a.atty, s * BT * C);
    const void* state = static_cast<const char*>(a.att_state) + s * a.att_state_bytes;
    const void* residual2 = at(a.residual2, s * BT * C);
    const void* ln2 = at(a.ln2, s * BT * C);
    const void* fch = at(a.fch, s * BT * 4 * C);
    const void* fch_gelu = at(a.fch_gelu, s * BT * 4 * C);

    // residual3 = residual2 + fcproj: both receive dresidual unchanged, so the
    // MLP branch reads dresidual as d(fcproj) and its LayerNorm adds into it.
    backend_.matmul_backward(dt, gt, a.dfch_gelu, kWrite, gp.fcproj_w, gp.fcproj_b, mode,
                             a.dresidual, fch_gelu, p.fcproj_w, N, 4 * C, C);
    backend_.gelu_backward(dt, a.dfch, kWrite, fch, a.dfch_gelu, BT * 4 * C);
    backend_.matmul_backward(dt, gt, a.dln, kWrite, gp.fc_w, gp.fc_b, mode, a.dfch, ln2, p.fc_w, N,
                             C, 4 * C);
    backend_.layernorm_backward(dt, gt, a.dresidual, kAdd, gp.ln2_w, gp.ln2_b, mode, a.dln,
                                residual2, p.ln2_w, a.ln2_mean + s * BT, a.ln2_rstd + s * BT, N, C);
    // residual2 = residual + attproj: the same pattern for the attention branch.
    backend_.matmul_backward(dt, gt, a.datty, kWrite, gp.attproj_w, gp.attproj_b, mode, a.dresidual,
                             atty, p.attproj_w, N, C, C);
    backend_.attention_backward(dt, a.dqkv, kWrite, a.datty, qkv, atty, state, a.att_scratch, B, T,
                                C, NH);
    backend_.matmul_backward(dt, gt, a.dln, kWrite, gp.qkv_w, gp.qkv_b, mode, a.dqkv, ln1, p.qkv_w,
                             N, C, 3 * C);
    backend_.layernorm_backward(dt, gt, a.dresidual, kAdd, gp.ln1_w, gp.ln1_b, mode, a.dln,
                                residual, p.ln1_w, a.ln1_mean + l * BT, a.ln1_rstd + l * BT, N, C);
  }
  backend_.encoder_backward(dt, gt, g_.wte, g_.wpe, a.dresidual, host_inputs_.data(), B, T, C);
  if (compute_ != dtype_) {
    // O1: the compute gradients (accumulated over this step's micro-batches so
    // far) widened into the gradients the optimizer sees.
    backend_.convert(grads_dtype_, grads_, compute_, compute_grads_, layout_.total_size());
  }
}

}  // namespace srkit

// The GPT-2 model on a Backend: flat parameter and gradient buffers (layout in
// param_layout.h, reached through ParamViews), activations sized for the batch
// in use, and the forward and backward passes written once against the
// Backend's ops. Everything a pass does is enqueued on the backend's stream; the
// only host reads are in the synchronous conveniences (the float forward,
// logits, weights_as_f32).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "kernels/common/dtype.h"
#include "lib/backend/backend.h"
#include "lib/model/gpt_config.h"
#include "lib/model/param_layout.h"
#include "lib/model/param_views.h"

namespace srkit {

class PhaseTimers;

// One activation buffer the model allocates (MemCategory::kActivations) for a
// [B, T] batch: saved forward activations, what attention keeps for backward
// (Backend::attention_sizes), fp32 LayerNorm statistics and losses, token ids,
// and the backward pass's scratch.
struct ActivationBuffer {
  const char* name;  // e.g. "qkv"
  size_t bytes;
  int layers;  // L when stacked per layer on a leading L axis, else 1
};

class GPT {
 public:
  // dtype: storage of weights, activations and gradients.
  GPT(Backend& backend, const GPTConfig& config, DType dtype);
  // compute != dtype (PrecisionStrategy::casts_for_compute, f32 weights with
  // bf16 compute): activations are compute-typed, every forward first casts the
  // weights into a compute copy, the backward writes compute-typed gradients
  // (accumulating over micro-batches) and widens them into the gradient buffer.
  // Both copies are allocated as scratch (they are the "transient" bytes).
  GPT(Backend& backend, const GPTConfig& config, DType dtype, DType compute);
  // grads: the gradient buffer's dtype, dtype or f32 (AdamWRule::grads). f32
  // gradients of bf16 weights (computed in bf16) are written by the backward
  // ops unrounded; they do not combine with compute != dtype (whose f32
  // weights have f32 gradients already). Throws std::invalid_argument otherwise.
  GPT(Backend& backend, const GPTConfig& config, DType dtype, DType compute, DType grads);
  ~GPT();
  GPT(const GPT&) = delete;
  GPT& operator=(const GPT&) = delete;

  const GPTConfig& config() const { return config_; }
  const ParamLayout& layout() const { return layout_; }
  DType dtype() const { return dtype_; }             // the weights the optimizer sees
  DType grad_dtype() const { return grads_dtype_; }  // the gradients it sees
  DType compute_dtype() const { return compute_; }
  Backend& backend() { return backend_; }
  void* weights() { return weights_; }
  void* grads() { return grads_; }
  size_t weight_bytes() const { return layout_.total_size() * dtype_size(dtype_); }
  size_t grad_bytes() const { return layout_.total_size() * dtype_size(grads_dtype_); }

  // GPT-2 initialisation, deterministic from the seed: N(0, 0.02) for embeddings
  // and matrices, 0.02/sqrt(2L) for the residual projections, zero biases, unit
  // LayerNorm gains; padded vocabulary rows stay zero. Values are drawn in fp32
  // (RngPurpose::kInit) and rounded to nearest into the weight dtype. Returns the
  // fp32 values (rounded to the weight dtype, so every strategy starts from the
  // same weights).
  std::vector<float> init_weights(uint64_t seed);
  // Host fp32 values (widened from the weight dtype) <-> device weights.
  std::vector<float> weights_as_f32();
  void set_weights_from_f32(const std::vector<float>& values);

  // Enqueues the forward pass over B rows of T tokens (host arrays of B*T, copied
  // before the call returns). With targets, the mean cross-entropy over
  // positions whose target is >= 0 is written to the device double *loss (when
  // not null) and a later backward() may follow.
  void forward(const int32_t* inputs, const int32_t* targets, int B, int T, double* loss);
  // Synchronous convenience (evaluation, generation, tests): forward, then read
  // the loss back; 0 without targets.
  float forward(const int32_t* inputs, const int32_t* targets, int B, int T);
  // After a forward with targets: gradients of loss * loss_scale, stored into the
  // gradient buffer by `mode` (kOverwrite: the first micro-batch of a step).
  void backward(float loss_scale, GradWrite mode = GradWrite::kAccumulate);
  // A training micro-batch in one go: forward, the fused classifier (loss and
  // dlogits in one pass over the logits), backward. Same results as forward +
  // backward.
  void forward_backward(const int32_t* inputs, const int32_t* targets, int B, int T,
                        float loss_scale, GradWrite mode, double* loss);
  void zero_grads();
  // After a forward: fp32 logits (first vocab_size) of row b, position t.
  std::vector<float> logits(int b, int t);

  void set_timers(PhaseTimers* timers) { timers_ = timers; }

  // Every activation buffer a forward/backward over [B, T] allocates on `device`
  // (Backend::kind()), in allocation order, for activations of dtype `dtype`
  // (the compute dtype). ensure_activations() allocates exactly this list, so
  // memory models (lib/train/memory_model.h) and the model share one source.
  // recompute: the buffers of set_recompute(true).
  static std::vector<ActivationBuffer> activation_buffers(const GPTConfig& config, DType dtype,
                                                          int B, int T, DeviceKind device,
                                                          bool recompute = false);
  static size_t activation_bytes(const GPTConfig& config, DType dtype, int B, int T,
                                 DeviceKind device, bool recompute = false);

  // Activation recomputation (sr-train --recompute layer): forward keeps only
  // each layer's input (its residual stream and the LayerNorm of it, with the
  // statistics) and one layer's worth of everything else; backward recomputes
  // each layer's forward from its input, by the same ops in the same order,
  // before that layer's backward. Kernels are deterministic, so the recomputed
  // activations, and with them the losses and gradients, are the bits of a run
  // without recomputation. Changing it frees the activations.
  void set_recompute(bool on);
  bool recompute() const { return recompute_; }

 private:
  struct Acts;
  // Binds every pointer of `acts` to alloc(buffer) for the buffers of a [B, T] batch.
  static void bind_activations(Acts& acts, const GPTConfig& config, DType dtype, int B, int T,
                               DeviceKind device, bool recompute,
                               const std::function<void*(const ActivationBuffer&)>& alloc);
  void ensure_activations(int B, int T);
  void free_activations();
  void* at(void* base, size_t elements) const;
  // Checks and uploads a batch; counts the valid targets.
  void load_batch(const int32_t* inputs, const int32_t* targets, int B, int T);
  void forward_to_logits();  // the layers and the classifier matmul, for the loaded batch
  // Layer l's forward from its input; with to_next, also its output (the
  // residual stream) and the next LayerNorm, which a recomputation keeps.
  void layer_forward(int l, bool to_next);
  // Which per-layer slot layer l's recomputable activations use: l, or 0 when
  // recomputing (one layer's worth is allocated).
  size_t slot(int l) const { return recompute_ ? 0 : size_t(l); }
  void backward_from_dlogits(GradWrite mode);

  Backend& backend_;
  GPTConfig config_;
  ParamLayout layout_;
  DType dtype_, compute_, grads_dtype_;
  DType param_grad_dt_;  // what the backward ops store: compute_ when casting, else grads_dtype_
  void* weights_ = nullptr;
  void* grads_ = nullptr;
  // The compute-typed copies when compute_ != dtype_; else weights_ and grads_.
  void* compute_weights_ = nullptr;
  void* compute_grads_ = nullptr;
  ParamViews w_, g_;  // views of the compute weights and gradients the passes use
  Acts* acts_ = nullptr;
  bool recompute_ = false;
  int cap_B_ = 0, cap_T_ = 0;         // activation capacity
  int B_ = 0, T_ = 0;                 // shape of the loaded batch
  int valid_targets_ = 0;             // targets >= 0 in the loaded batch
  bool have_dlogits_source_ = false;  // logits + targets of a forward that backward may use
  std::vector<int32_t>
      host_inputs_;  // the loaded batch's tokens (encoder_backward plans with them)
  PhaseTimers* timers_ = nullptr;
};

}  // namespace srkit

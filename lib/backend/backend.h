// The engine's view of a device: allocation with per-category accounting,
// copies, and one method per op. The model, optimizer and trainer talk only to
// this interface; CpuBackend always exists, CudaBackend implements the same
// methods when the CUDA backend is built. Pointers are device pointers of the
// backend; DType says how the tensors an op touches are stored (fp32 arithmetic
// inside every op). Shapes and numerics of each op: kernels/cpu/elements.h.
//
// ## Execution model (docs/architecture.md)
// - A backend is a stream. Every op is asynchronous with respect to the host on
//   a device backend: ops run in issue order, and the host waits only at named
//   points: synchronize() and copy_to_host(). The CPU backend is simply
//   synchronous.
// - No host round trip inside a training step. Losses, the global gradient
//   norm, the clip factor and the optimizer telemetry are written to device
//   memory by ops (mean_loss, sum_squares, grad_clip, adamw_step) and consumed
//   there; the host reads them once per optimizer step, after the step.
// - No allocation inside a step. Everything an op needs beyond its arguments is
//   either allocated by the caller once (through allocate(), so it is
//   accounted) or prepared once (prepare_adamw); counters() lets tests prove it.
// - Backward ops write or accumulate by an explicit GradWrite per output, so no
//   buffer is cleared just to be added into.
// - The backward ops that produce parameter gradients (encoder, layernorm,
//   matmul) store them as `grad_dt`: dt, or f32 with bf16 dt (a strategy's
//   g=f32, AdamWRule::grads), unrounded then.
// - The backend owns what attention saves for backward: attention_sizes() says
//   how many bytes per layer (and of shared scratch) it needs, the model
//   allocates them, and the memory model asks the same function.
// - Fused entry points (matmul + bias + GELU, residual + layernorm, the
//   classifier) have default implementations here that compose the plain ops,
//   so a backend overrides only what it can do better.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

#include "kernels/common/adamw.h"
#include "kernels/common/dtype.h"
#include "kernels/common/grad_write.h"
#include "kernels/common/step_record.h"
#include "kernels/cuda/stream.h"
#include "lib/backend/attention_sizes.h"
#include "lib/backend/device_kind.h"
#include "lib/util/system_memory.h"

namespace srkit {

enum class MemCategory : int {
  kWeights = 0,
  kMaster,
  kGrads,
  kOptState,  // m, v and Kahan compensation
  kActivations,
  kScratch,
  kCount
};
const char* mem_category_name(MemCategory c);
constexpr int kNumMemCategories = static_cast<int>(MemCategory::kCount);

struct MemoryStats {
  std::array<size_t, kNumMemCategories> current{};
  std::array<size_t, kNumMemCategories> peak{};  // per-category high-water marks
  size_t total_current = 0;
  size_t total_peak = 0;  // high-water mark of the sum
};

// Thrown when an allocation would exceed the backend's limit (a planted limit in
// tests, or the device running out): callers report it as "out of memory".
struct OutOfMemory : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Events of the execution model a test can count: allocate() calls (kernel
// workspaces included), host reads (copy_to_host) and host writes
// (copy_to_device).
struct BackendCounters {
  uint64_t allocations = 0;
  uint64_t host_reads = 0;
  uint64_t host_writes = 0;
};

// The optimizer's fixed per-call data (segment table, reduction scratch),
// prepared once by Backend::prepare_adamw for one range of the flat buffer.
class AdamWPlan {
 public:
  virtual ~AdamWPlan() = default;
  size_t begin() const { return begin_; }
  size_t end() const { return end_; }

 protected:
  AdamWPlan(size_t begin, size_t end) : begin_(begin), end_(end) {}

 private:
  size_t begin_, end_;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual DeviceKind kind() const = 0;                           // the key of attention_sizes()
  std::string name() const { return device_kind_name(kind()); }  // "cpu" or "cuda", for messages
  virtual std::string description() const = 0;
  // The stream a communicator orders its collectives after
  // (Communicator::use_stream); nullptr for the CPU.
  virtual cuda::Stream native_stream() const { return nullptr; }
  // What a run may still allocate here: the host's available memory (capped by
  // its cgroup) for the CPU, a GPU's free memory. A run compares it with the
  // memory model before allocating (docs/reliability.md); 0 bytes: unknown.
  virtual AvailableMemory available_memory() const { return available_host_memory(); }

  // ---- memory: zero-initialised, accounted by category ----
  void* allocate(size_t bytes, MemCategory category);
  void release(void* ptr);
  MemoryStats memory() const;
  BackendCounters counters() const { return counters_; }
  void set_memory_limit(size_t bytes) { limit_ = bytes; }  // 0 = none
  // host_src may be reused as soon as the call returns (a device backend stages it).
  void copy_to_device(void* dst, const void* host_src, size_t bytes);
  // Waits for the stream, then copies.
  void copy_to_host(void* host_dst, const void* src, size_t bytes);
  virtual void copy(void* dst, const void* src, size_t bytes) = 0;  // device to device
  virtual void fill_zero(void* ptr, size_t bytes) = 0;
  virtual void synchronize() {}

  // ---- model ops (see kernels/cpu/elements.h for shapes and conventions) ----
  // Element conversion of n values (narrowing rounds to nearest even); from == to copies.
  virtual void convert(DType to, void* dst, DType from, const void* src, size_t n) = 0;
  virtual void encoder_forward(DType dt, void* out, const int32_t* tokens, const void* wte,
                               const void* wpe, int B, int T, int C) = 0;
  // Accumulates into dwte and dwpe (rows no position touches keep their value).
  // host_tokens: the batch's B*T tokens in host memory (encoder_forward's
  // tokens, copied to the device, are the same values): a device backend plans
  // its deterministic per-token reduction from them, the CPU reads them.
  virtual void encoder_backward(DType dt, DType grad_dt, void* dwte, void* dwpe, const void* dout,
                                const int32_t* host_tokens, int B, int T, int C) = 0;
  virtual void layernorm_forward(DType dt, void* out, float* mean, float* rstd, const void* inp,
                                 const void* weight, const void* bias, int N, int C) = 0;
  virtual void layernorm_backward(DType dt, DType grad_dt, void* dinp, GradWrite dinp_mode,
                                  void* dweight, void* dbias, GradWrite param_mode,
                                  const void* dout, const void* inp, const void* weight,
                                  const float* mean, const float* rstd, int N, int C) = 0;
  virtual void matmul_forward(DType dt, void* out, const void* inp, const void* weight,
                              const void* bias, int N, int C, int OC) = 0;
  // dbias may be null.
  virtual void matmul_backward(DType dt, DType grad_dt, void* dinp, GradWrite dinp_mode,
                               void* dweight, void* dbias, GradWrite param_mode, const void* dout,
                               const void* inp, const void* weight, int N, int C, int OC) = 0;
  // Causal self-attention. state: this layer's attention_sizes().state_per_layer
  // bytes, written by forward and read by backward; scratch: the shared
  // attention_sizes().scratch bytes (may be null when that is 0).
  AttentionSizes attention_sizes(DType dt, int B, int T, int C, int NH) const {
    return srkit::attention_sizes(kind(), dt, B, T, C, NH);
  }
  virtual void attention_forward(DType dt, void* out, void* state, void* scratch, const void* inp,
                                 int B, int T, int C, int NH) = 0;
  // dinp: [B,T,3C]; out: forward's output (a flash-style backward needs it).
  virtual void attention_backward(DType dt, void* dinp, GradWrite dinp_mode, const void* dout,
                                  const void* inp, const void* out, const void* state,
                                  void* scratch, int B, int T, int C, int NH) = 0;
  virtual void gelu_forward(DType dt, void* out, const void* inp, size_t n) = 0;
  virtual void gelu_backward(DType dt, void* dinp, GradWrite dinp_mode, const void* inp,
                             const void* dout, size_t n) = 0;
  virtual void residual_forward(DType dt, void* out, const void* a, const void* b, size_t n) = 0;
  virtual void crossentropy_forward(DType dt, float* losses, const void* logits,
                                    const int32_t* targets, int N, int V, int Vp) = 0;
  virtual void crossentropy_backward(DType dt, void* dlogits, const void* logits,
                                     const int32_t* targets, float dloss, int N, int V, int Vp) = 0;

  // ---- fused entry points (defaults compose the plain ops) ----
  // pre = inp @ weight^T + bias (kept for backward), out = gelu(pre).
  virtual void matmul_bias_gelu_forward(DType dt, void* out, void* pre, const void* inp,
                                        const void* weight, const void* bias, int N, int C, int OC);
  // residual = a + b; ln = layernorm(residual).
  virtual void residual_layernorm_forward(DType dt, void* residual, void* ln, float* mean,
                                          float* rstd, const void* a, const void* b,
                                          const void* weight, const void* bias, int N, int C);
  // The classifier in one pass: losses[N] and, in place of the logits, dlogits
  // = (softmax - onehot) * dloss (crossentropy_forward then _backward).
  virtual void classifier(DType dt, void* logits, float* losses, const int32_t* targets,
                          float dloss, int N, int V, int Vp);

  // ---- reductions whose results stay on the device ----
  // *out = (sum of losses[i] over rows whose target is >= 0) / count, in fp64,
  // rows in order.
  virtual void mean_loss(const float* losses, const int32_t* targets, int N, int count,
                         double* out) = 0;
  // *out = sum of x[i]^2 in fp64, in a fixed order for any thread count.
  virtual void sum_squares(DType dt, const void* x, size_t n, double* out) = 0;
  // *out = grad_clip_from_records(records, world, accum, max_norm) (kernels/common/step_record.h).
  virtual void grad_clip(const double* records, int world, int accum, float max_norm,
                         GradClip* out) = 0;
  // dst[j] = the elem_bytes-wide element src[indices[j]], j < n (indices on the device).
  virtual void gather(void* dst, const void* src, size_t elem_bytes, const uint64_t* indices,
                      size_t n) = 0;

  // ---- optimizer: one fused AdamW pass over the flat elements of a plan ----
  virtual std::unique_ptr<AdamWPlan> prepare_adamw(const std::vector<ParamSegment>& segments,
                                                   size_t begin, size_t end) = 0;
  // clip (device, nullable): when given, its scale replaces hyper.grad_scale and
  // nothing changes when !clip->ok. telemetry (device, nullable): overwritten
  // with this call's sums.
  virtual void adamw_step(const AdamWPlan& plan, const AdamWRule& rule, const AdamWBuffers& buffers,
                          const AdamWHyper& hyper, const GradClip* clip,
                          AdamWTelemetry* telemetry) = 0;

 protected:
  virtual void* raw_allocate(size_t bytes) = 0;  // zeroed; throws OutOfMemory
  virtual void raw_release(void* ptr) = 0;
  virtual void raw_copy_to_device(void* dst, const void* host_src, size_t bytes) = 0;
  virtual void raw_copy_to_host(void* host_dst, const void* src, size_t bytes) = 0;
  // Extra bytes the backend holds outside allocate() (e.g. kernel workspaces),
  // reported as scratch; a workspace that grows counts as an allocation.
  virtual size_t scratch_bytes() const { return 0; }
  virtual size_t scratch_peak_bytes() const { return 0; }
  void count_workspace_growth() { ++counters_.allocations; }

 private:
  struct Allocation {
    size_t bytes;
    MemCategory category;
  };
  std::unordered_map<void*, Allocation> allocations_;
  MemoryStats stats_;
  BackendCounters counters_;
  size_t limit_ = 0;
};

// Throws std::invalid_argument naming `op` unless parameter gradients of type
// grad_dt may go with activations of type dt (grad_dt == dt, or f32 with bf16).
void check_grad_dtype(const char* op, DType dt, DType grad_dt);

// The one place that turns --device into a backend. threads: CPU threads (0 =
// the OpenMP default; the CUDA backend ignores it). Throws std::invalid_argument
// naming --device when the CUDA backend is not built or no device is present
// (with the runtime's reason).
std::unique_ptr<Backend> make_backend(DeviceKind device, int threads);
// --device as given: "cpu" or "cuda" (parse_device_kind).
std::unique_ptr<Backend> make_backend(const std::string& device, int threads);

std::unique_ptr<Backend> make_cpu_backend(int threads);
// Built with the CUDA backend (a GPU, or the CPU emulation of CUDA) only.
// Throws std::invalid_argument naming --device and the runtime's reason when no
// device is usable.
std::unique_ptr<Backend> make_cuda_backend();

}  // namespace srkit

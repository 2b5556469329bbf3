// CudaBackend: device memory and the kernels of kernels/cuda, on one stream
// (the execution model of backend.h). Built with the CUDA backend, for a GPU
// or for the CPU emulation of CUDA (docs/cuda-emulation.md). Plain C++: it
// reaches CUDA only through the launcher headers of kernels/cuda.
//
// Every op is queued on the backend's stream and returns at once. What ops need
// beyond their arguments lives in buffers owned here and grown only while the
// first step sizes them (each growth is counted as an allocation): one
// per-call scratch buffer (ops run in stream order, so they can share it),
// the cuBLASLt workspace, and a ring of pinned host slots that stage
// copy_to_device.
#include <algorithm>
#include <array>
#include <cstring>
#include <stdexcept>

#include "kernels/cuda/adamw.h"
#include "kernels/cuda/attention.h"
#include "kernels/cuda/cast.h"
#include "kernels/cuda/device.h"
#include "kernels/cuda/encoder.h"
#include "kernels/cuda/gemm.h"
#include "kernels/cuda/layernorm.h"
#include "kernels/cuda/loss.h"
#include "kernels/cuda/pointwise.h"
#include "kernels/cuda/reduce.h"
#include "lib/backend/backend.h"

namespace srkit {
namespace {

// Copies larger than this go through a synchronous copy instead of the pinned
// ring: they happen outside training steps (weights, checkpoints), and a ring
// slot that large would pin that much host memory for the rest of the run.
constexpr size_t kMaxStagedBytes = size_t(64) << 20;
constexpr int kStagingSlots = 4;

class CudaAdamWPlan final : public AdamWPlan {
 public:
  CudaAdamWPlan(Backend& backend, size_t begin, size_t end, size_t bytes)
      : AdamWPlan(begin, end),
        backend_(backend),
        device(backend.allocate(bytes, MemCategory::kScratch)) {}
  ~CudaAdamWPlan() override { backend_.release(device); }

 private:
  Backend& backend_;

 public:
  void* const device;
};

class CudaBackend final : public Backend {
 public:
  CudaBackend() : stream_(cuda::stream_create()), gemm_(std::make_unique<cuda::Gemm>(stream_)) {
    for (StagingSlot& slot : staging_) slot.done = cuda::event_create();
  }

  ~CudaBackend() override {
    try {
      cuda::stream_synchronize(stream_);
    } catch (const std::exception&) {
      // A failed device: release what can be released.
    }
    gemm_.reset();
    if (scratch_) cuda::device_free(scratch_);
    for (StagingSlot& slot : staging_) {
      if (slot.host) cuda::host_free_pinned(slot.host);
      cuda::event_destroy(slot.done);
    }
    cuda::stream_destroy(stream_);
  }

  DeviceKind kind() const override { return DeviceKind::kCuda; }
  std::string description() const override { return "CUDA: " + cuda::device_description(); }
  AvailableMemory available_memory() const override {
    size_t free_bytes = 0, total_bytes = 0;
    cuda::memory_info(&free_bytes, &total_bytes);
    return {free_bytes, "free memory of " + cuda::device_description() + " (cudaMemGetInfo)"};
  }
  cuda::Stream native_stream() const override { return stream_; }

  void copy(void* dst, const void* src, size_t bytes) override {
    cuda::copy_device_async(dst, src, bytes, stream_);
  }
  void fill_zero(void* ptr, size_t bytes) override { cuda::fill_zero_async(ptr, bytes, stream_); }
  void synchronize() override { cuda::stream_synchronize(stream_); }

  void convert(DType to, void* dst, DType from, const void* src, size_t n) override {
    if (to == from) {
      copy(dst, src, n * dtype_size(to));
    } else if (to == DType::kBF16) {
      cuda::cast_f32_to_bf16_rn(static_cast<const float*>(src), static_cast<bf16*>(dst), n,
                                stream_);
    } else {
      cuda::cast_bf16_to_f32(static_cast<const bf16*>(src), static_cast<float*>(dst), n, stream_);
    }
  }

  void encoder_forward(DType dt, void* out, const int32_t* tokens, const void* wte, const void* wpe,
                       int B, int T, int C) override {
    cuda::encoder_forward(dt, out, tokens, wte, wpe, B, T, C, stream_);
  }
  void encoder_backward(DType dt, DType grad_dt, void* dwte, void* dwpe, const void* dout,
                        const int32_t* host_tokens, int B, int T, int C) override {
    check_grad_dtype("encoder_backward", dt, grad_dt);
    encoder_plan_.build(host_tokens, B * T);
    void* plan = scratch(encoder_plan_.packed_bytes());
    stage_to_device(plan, encoder_plan_.packed(), encoder_plan_.packed_bytes());
    cuda::encoder_backward(dt, grad_dt, dwte, dwpe, dout, plan, encoder_plan_.groups(), B, T, C,
                           stream_);
  }
  void layernorm_forward(DType dt, void* out, float* mean, float* rstd, const void* inp,
                         const void* weight, const void* bias, int N, int C) override {
    cuda::layernorm_forward(dt, out, mean, rstd, inp, weight, bias, N, C, stream_);
  }
  void layernorm_backward(DType dt, DType grad_dt, void* dinp, GradWrite dinp_mode, void* dweight,
                          void* dbias, GradWrite param_mode, const void* dout, const void* inp,
                          const void* weight, const float* mean, const float* rstd, int N,
                          int C) override {
    check_grad_dtype("layernorm_backward", dt, grad_dt);
    void* ws = scratch(cuda::layernorm_backward_scratch_bytes(N, C));
    cuda::layernorm_backward(dt, grad_dt, dinp, dinp_mode, dweight, dbias, param_mode, dout, inp,
                             weight, mean, rstd, N, C, ws, stream_);
  }
  void matmul_forward(DType dt, void* out, const void* inp, const void* weight, const void* bias,
                      int N, int C, int OC) override {
    gemm_->matmul_forward(dt, out, inp, weight, bias, N, C, OC);
  }
  void matmul_backward(DType dt, DType grad_dt, void* dinp, GradWrite dinp_mode, void* dweight,
                       void* dbias, GradWrite param_mode, const void* dout, const void* inp,
                       const void* weight, int N, int C, int OC) override {
    check_grad_dtype("matmul_backward", dt, grad_dt);
    void* ws = dbias ? scratch(gemm_->matmul_backward_scratch_bytes(N, OC)) : nullptr;
    gemm_->matmul_backward(dt, grad_dt, dinp, dinp_mode, dweight, dbias, param_mode, dout, inp,
                           weight, N, C, OC, ws);
  }
  void attention_forward(DType dt, void* out, void* state, void* scratch, const void* inp, int B,
                         int T, int C, int NH) override {
    cuda::attention_forward(*gemm_, dt, out, state, scratch, inp, B, T, C, NH, stream_);
  }
  void attention_backward(DType dt, void* dinp, GradWrite dinp_mode, const void* dout,
                          const void* inp, const void* out, const void* state, void* scratch, int B,
                          int T, int C, int NH) override {
    cuda::attention_backward(*gemm_, dt, dinp, dinp_mode, dout, inp, out, state, scratch, B, T, C,
                             NH, stream_);
  }
  void gelu_forward(DType dt, void* out, const void* inp, size_t n) override {
    cuda::gelu_forward(dt, out, inp, n, stream_);
  }
  void gelu_backward(DType dt, void* dinp, GradWrite dinp_mode, const void* inp, const void* dout,
                     size_t n) override {
    cuda::gelu_backward(dt, dinp, dinp_mode, inp, dout, n, stream_);
  }
  void residual_forward(DType dt, void* out, const void* a, const void* b, size_t n) override {
    cuda::residual_forward(dt, out, a, b, n, stream_);
  }
  void crossentropy_forward(DType dt, float* losses, const void* logits, const int32_t* targets,
                            int N, int V, int Vp) override {
    cuda::crossentropy_forward(dt, losses, logits, targets, N, V, Vp, stream_);
  }
  void crossentropy_backward(DType dt, void* dlogits, const void* logits, const int32_t* targets,
                             float dloss, int N, int V, int Vp) override {
    cuda::crossentropy_backward(dt, dlogits, logits, targets, dloss, N, V, Vp, stream_);
  }

  void residual_layernorm_forward(DType dt, void* residual, void* ln, float* mean, float* rstd,
                                  const void* a, const void* b, const void* weight,
                                  const void* bias, int N, int C) override {
    cuda::residual_layernorm_forward(dt, residual, ln, mean, rstd, a, b, weight, bias, N, C,
                                     stream_);
  }
  void classifier(DType dt, void* logits, float* losses, const int32_t* targets, float dloss, int N,
                  int V, int Vp) override {
    cuda::classifier(dt, logits, losses, targets, dloss, N, V, Vp, stream_);
  }

  void mean_loss(const float* losses, const int32_t* targets, int N, int count,
                 double* out) override {
    cuda::mean_loss(losses, targets, N, count, out, stream_);
  }
  void sum_squares(DType dt, const void* x, size_t n, double* out) override {
    cuda::sum_squares(dt, x, n, out, scratch(cuda::sum_squares_scratch_bytes(n)), stream_);
  }
  void grad_clip(const double* records, int world, int accum, float max_norm,
                 GradClip* out) override {
    cuda::grad_clip(records, world, accum, max_norm, out, stream_);
  }
  void gather(void* dst, const void* src, size_t elem_bytes, const uint64_t* indices,
              size_t n) override {
    cuda::gather(dst, src, elem_bytes, indices, n, stream_);
  }

  std::unique_ptr<AdamWPlan> prepare_adamw(const std::vector<ParamSegment>& segments, size_t begin,
                                           size_t end) override {
    const std::vector<unsigned char> image =
        cuda::adamw_plan_image(segments.data(), segments.size(), begin, end);
    auto plan = std::make_unique<CudaAdamWPlan>(*this, begin, end, image.size());
    copy_to_device(plan->device, image.data(), image.size());
    return plan;
  }
  void adamw_step(const AdamWPlan& plan, const AdamWRule& rule, const AdamWBuffers& buffers,
                  const AdamWHyper& hyper, const GradClip* clip,
                  AdamWTelemetry* telemetry) override {
    const auto& p = static_cast<const CudaAdamWPlan&>(plan);
    cuda::adamw_step(rule, buffers, p.device, p.begin(), p.end(), hyper, clip, telemetry, stream_);
  }

 protected:
  void* raw_allocate(size_t bytes) override {
    size_t free_bytes = 0, total_bytes = 0;
    cuda::memory_info(&free_bytes, &total_bytes);
    if (bytes > free_bytes) {
      throw OutOfMemory("cuda: out of device memory allocating " + std::to_string(bytes) +
                        " bytes (" + std::to_string(free_bytes) + " free of " +
                        std::to_string(total_bytes) + ")");
    }
    void* p = cuda::device_malloc(bytes);
    // Zero-initialised, as allocate() promises; before any later op on the stream.
    cuda::fill_zero_async(p, bytes, stream_);
    return p;
  }
  void raw_release(void* ptr) override {
    cuda::stream_synchronize(stream_);  // no queued op may still use it
    cuda::device_free(ptr);
  }
  void raw_copy_to_device(void* dst, const void* src, size_t bytes) override {
    if (bytes > kMaxStagedBytes) {
      cuda::stream_synchronize(stream_);
      cuda::copy_to_device(dst, src, bytes);
      return;
    }
    stage_to_device(dst, src, bytes);
  }
  void raw_copy_to_host(void* dst, const void* src, size_t bytes) override {
    cuda::stream_synchronize(stream_);
    cuda::copy_to_host(dst, src, bytes);
  }
  size_t scratch_bytes() const override { return scratch_bytes_ + gemm_->workspace_bytes(); }
  size_t scratch_peak_bytes() const override { return scratch_bytes(); }

 private:
  struct StagingSlot {
    void* host = nullptr;
    size_t bytes = 0;
    cuda::Event done = nullptr;
    bool in_flight = false;
  };

  // The per-call scratch, at least `bytes`; grows (counted) only while the
  // first step sizes it. Ops run in stream order, so each may use all of it.
  void* scratch(size_t bytes) {
    if (bytes > scratch_bytes_) {
      if (scratch_) {
        cuda::stream_synchronize(stream_);
        cuda::device_free(scratch_);
        scratch_ = nullptr;
        scratch_bytes_ = 0;
      }
      scratch_ = cuda::device_malloc(bytes);
      scratch_bytes_ = bytes;
      count_workspace_growth();
    }
    return scratch_;
  }

  // Copies host bytes into a pinned slot and queues the slot's copy to dst.
  // A slot is reused after the copy queued from it last has run; with a ring
  // of slots that wait is on work long finished, not on the step in flight.
  void stage_to_device(void* dst, const void* src, size_t bytes) {
    if (bytes == 0) return;
    StagingSlot& slot = staging_[next_slot_];
    next_slot_ = (next_slot_ + 1) % kStagingSlots;
    if (slot.bytes < bytes) {
      // Every slot grows to the largest copy seen so far: which slot a copy
      // lands in shifts from step to step, so slots that grew one at a time
      // would keep growing after the first step.
      for (StagingSlot& s : staging_) {
        if (s.in_flight) cuda::event_synchronize(s.done);
        if (s.host) cuda::host_free_pinned(s.host);
        s.host = cuda::host_alloc_pinned(bytes);
        s.bytes = bytes;
        s.in_flight = false;
      }
      count_workspace_growth();
    }
    if (slot.in_flight) cuda::event_synchronize(slot.done);
    std::memcpy(slot.host, src, bytes);
    cuda::copy_to_device_async(dst, slot.host, bytes, stream_);
    cuda::event_record(slot.done, stream_);
    slot.in_flight = true;
  }

  cuda::Stream stream_;
  std::unique_ptr<cuda::Gemm> gemm_;
  void* scratch_ = nullptr;
  size_t scratch_bytes_ = 0;
  std::array<StagingSlot, kStagingSlots> staging_;
  int next_slot_ = 0;
  cuda::EncoderBackwardPlan encoder_plan_;
};

}  // namespace

std::unique_ptr<Backend> make_cuda_backend() {
  std::string reason;
  if (!cuda::device_available(&reason)) throw std::invalid_argument("--device cuda: " + reason);
  return std::make_unique<CudaBackend>();
}

}  // namespace srkit

// CpuBackend: host memory and the OpenMP/BLAS kernels of kernels/cpu. Every op
// runs to completion before it returns, so the stream of the execution model is
// simply program order, and "device" results are host memory the caller may
// read directly (tests do; the engine goes through copy_to_host all the same).
#include <omp.h>

#include <cstring>

#include "kernels/common/dtype_dispatch.h"
#include "kernels/cpu/adamw.h"
#include "kernels/cpu/attention.h"
#include "kernels/cpu/cast.h"
#include "kernels/cpu/encoder.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/host_alloc.h"
#include "kernels/cpu/layernorm.h"
#include "kernels/cpu/loss.h"
#include "kernels/cpu/pointwise.h"
#include "kernels/cpu/reduce.h"
#include "kernels/cpu/workspace.h"
#include "lib/backend/backend.h"

extern "C" void openblas_set_num_threads(int);

namespace srkit {
namespace {

// The parameter-gradient pair checked, then f(T{}, G{}) (with_grad_dtypes).
template <typename F>
void dispatch_grads(const char* op, DType dt, DType grad_dt, F&& f) {
  check_grad_dtype(op, dt, grad_dt);
  with_grad_dtypes(dt, grad_dt, f);
}

template <typename T>
T* as(void* p) {
  return static_cast<T*>(p);
}
template <typename T>
const T* as(const void* p) {
  return static_cast<const T*>(p);
}

bool accumulates(GradWrite mode) { return mode == GradWrite::kAccumulate; }

// The CPU optimizer needs only the segment table.
class CpuAdamWPlan final : public AdamWPlan {
 public:
  CpuAdamWPlan(std::vector<ParamSegment> segments, size_t begin, size_t end)
      : AdamWPlan(begin, end), segments(std::move(segments)) {}
  std::vector<ParamSegment> segments;
};

class CpuBackend final : public Backend {
 public:
  explicit CpuBackend(int threads) {
    if (threads > 0) {
      omp_set_num_threads(threads);
      openblas_set_num_threads(threads);
    }
    threads_ = omp_get_max_threads();
  }
  ~CpuBackend() override = default;

  DeviceKind kind() const override { return DeviceKind::kCpu; }
  std::string description() const override {
    return "CPU (" + std::to_string(threads_) + " OpenMP threads, OpenBLAS sgemm)";
  }

  void copy(void* dst, const void* src, size_t bytes) override { std::memcpy(dst, src, bytes); }
  void fill_zero(void* ptr, size_t bytes) override { std::memset(ptr, 0, bytes); }

  void convert(DType to, void* dst, DType from, const void* src, size_t n) override {
    if (to == from) {
      std::memcpy(dst, src, n * dtype_size(to));
    } else if (to == DType::kBF16) {
      cpu::cast_f32_to_bf16_rn(as<float>(src), as<bf16>(dst), n);
    } else {
      cpu::cast_bf16_to_f32(as<bf16>(src), as<float>(dst), n);
    }
  }

  void encoder_forward(DType dt, void* out, const int32_t* tokens, const void* wte, const void* wpe,
                       int B, int T, int C) override {
    with_dtype(dt, [&](auto tag) {
      using S = decltype(tag);
      cpu::encoder_forward<S>(as<S>(out), tokens, as<S>(wte), as<S>(wpe), B, T, C);
    });
  }
  void encoder_backward(DType dt, DType grad_dt, void* dwte, void* dwpe, const void* dout,
                        const int32_t* host_tokens, int B, int T, int C) override {
    dispatch_grads("encoder_backward", dt, grad_dt, [&](auto tag, auto grad_tag) {
      using S = decltype(tag);
      using G = decltype(grad_tag);
      cpu::encoder_backward<S, G>(as<G>(dwte), as<G>(dwpe), as<S>(dout), host_tokens, B, T, C);
    });
  }
  void layernorm_forward(DType dt, void* out, float* mean, float* rstd, const void* inp,
                         const void* weight, const void* bias, int N, int C) override {
    with_dtype(dt, [&](auto tag) {
      using S = decltype(tag);
      cpu::layernorm_forward<S>(as<S>(out), mean, rstd, as<S>(inp), as<S>(weight), as<S>(bias), N,
                                C);
    });
  }
  void layernorm_backward(DType dt, DType grad_dt, void* dinp, GradWrite dinp_mode, void* dweight,
                          void* dbias, GradWrite param_mode, const void* dout, const void* inp,
                          const void* weight, const float* mean, const float* rstd, int N,
                          int C) override {
    dispatch_grads("layernorm_backward", dt, grad_dt, [&](auto tag, auto grad_tag) {
      using S = decltype(tag);
      using G = decltype(grad_tag);
      cpu::layernorm_backward<S, G>(as<S>(dinp), dinp_mode, as<G>(dweight), as<G>(dbias),
                                    param_mode, as<S>(dout), as<S>(inp), as<S>(weight), mean, rstd,
                                    N, C);
    });
  }
  void matmul_forward(DType dt, void* out, const void* inp, const void* weight, const void* bias,
                      int N, int C, int OC) override {
    with_workspace([&](cpu::Workspace& ws) {
      with_dtype(dt, [&](auto tag) {
        using S = decltype(tag);
        cpu::matmul_forward<S>(as<S>(out), as<S>(inp), as<S>(weight), as<S>(bias), N, C, OC, ws);
      });
    });
  }
  void matmul_backward(DType dt, DType grad_dt, void* dinp, GradWrite dinp_mode, void* dweight,
                       void* dbias, GradWrite param_mode, const void* dout, const void* inp,
                       const void* weight, int N, int C, int OC) override {
    with_workspace([&](cpu::Workspace& ws) {
      dispatch_grads("matmul_backward", dt, grad_dt, [&](auto tag, auto grad_tag) {
        using S = decltype(tag);
        using G = decltype(grad_tag);
        cpu::matmul_backward<S, G>(as<S>(dinp), as<G>(dweight), as<G>(dbias), as<S>(dout),
                                   as<S>(inp), as<S>(weight), N, C, OC, ws, accumulates(dinp_mode),
                                   accumulates(param_mode));
      });
    });
  }
  void attention_forward(DType dt, void* out, void* state, void* /*scratch: none*/, const void* inp,
                         int B, int T, int C, int NH) override {
    with_dtype(dt, [&](auto tag) {
      using S = decltype(tag);
      cpu::attention_forward<S>(as<S>(out), as<S>(state), as<S>(inp), B, T, C, NH);
    });
  }
  void attention_backward(DType dt, void* dinp, GradWrite dinp_mode, const void* dout,
                          const void* inp, const void* /*out*/, const void* state,
                          void* /*scratch*/, int B, int T, int C, int NH) override {
    with_dtype(dt, [&](auto tag) {
      using S = decltype(tag);
      cpu::attention_backward<S>(as<S>(dinp), dinp_mode, as<S>(dout), as<S>(inp), as<S>(state), B,
                                 T, C, NH);
    });
  }
  void gelu_forward(DType dt, void* out, const void* inp, size_t n) override {
    with_dtype(dt, [&](auto tag) {
      using S = decltype(tag);
      cpu::gelu_forward<S>(as<S>(out), as<S>(inp), n);
    });
  }
  void gelu_backward(DType dt, void* dinp, GradWrite dinp_mode, const void* inp, const void* dout,
                     size_t n) override {
    with_dtype(dt, [&](auto tag) {
      using S = decltype(tag);
      cpu::gelu_backward<S>(as<S>(dinp), dinp_mode, as<S>(inp), as<S>(dout), n);
    });
  }
  void residual_forward(DType dt, void* out, const void* a, const void* b, size_t n) override {
    with_dtype(dt, [&](auto tag) {
      using S = decltype(tag);
      cpu::residual_forward<S>(as<S>(out), as<S>(a), as<S>(b), n);
    });
  }
  void crossentropy_forward(DType dt, float* losses, const void* logits, const int32_t* targets,
                            int N, int V, int Vp) override {
    with_dtype(dt, [&](auto tag) {
      using S = decltype(tag);
      cpu::crossentropy_forward<S>(losses, as<S>(logits), targets, N, V, Vp);
    });
  }
  void crossentropy_backward(DType dt, void* dlogits, const void* logits, const int32_t* targets,
                             float dloss, int N, int V, int Vp) override {
    with_dtype(dt, [&](auto tag) {
      using S = decltype(tag);
      cpu::crossentropy_backward<S>(as<S>(dlogits), as<S>(logits), targets, dloss, N, V, Vp);
    });
  }

  void mean_loss(const float* losses, const int32_t* targets, int N, int count,
                 double* out) override {
    double sum = 0.0;  // in order: the same bits for any thread count
    for (int i = 0; i < N; ++i) sum += targets[i] >= 0 ? losses[i] : 0.0f;
    *out = count > 0 ? sum / count : 0.0;
  }
  void sum_squares(DType dt, const void* x, size_t n, double* out) override {
    with_dtype(dt, [&](auto tag) {
      using S = decltype(tag);
      *out = cpu::sum_squares<S>(as<S>(x), n);
    });
  }
  void grad_clip(const double* records, int world, int accum, float max_norm,
                 GradClip* out) override {
    *out = grad_clip_from_records(records, world, accum, max_norm);
  }
  void gather(void* dst, const void* src, size_t elem_bytes, const uint64_t* indices,
              size_t n) override {
    for (size_t j = 0; j < n; ++j) {
      std::memcpy(as<char>(dst) + j * elem_bytes, as<char>(src) + indices[j] * elem_bytes,
                  elem_bytes);
    }
  }

  std::unique_ptr<AdamWPlan> prepare_adamw(const std::vector<ParamSegment>& segments, size_t begin,
                                           size_t end) override {
    return std::make_unique<CpuAdamWPlan>(segments, begin, end);
  }
  void adamw_step(const AdamWPlan& plan, const AdamWRule& rule, const AdamWBuffers& buffers,
                  const AdamWHyper& hyper, const GradClip* clip,
                  AdamWTelemetry* telemetry) override {
    const auto& p = static_cast<const CpuAdamWPlan&>(plan);
    AdamWHyper h = hyper;
    if (clip) {
      if (!clip->ok) {  // a non-finite gradient: the step changes nothing
        if (telemetry) *telemetry = AdamWTelemetry{};
        return;
      }
      h.grad_scale = clip->scale;
    }
    cpu::adamw_step(rule, buffers, p.segments.data(), p.segments.size(), p.begin(), p.end(), h,
                    telemetry);
  }

 protected:
  void* raw_allocate(size_t bytes) override {
    // 64-byte aligned (whole cache lines, aligned AVX loads), each large tensor
    // at its own offset within the page (kernels/cpu/host_alloc.h says why).
    void* p = cpu::host_alloc(bytes);
    if (p == nullptr)
      throw OutOfMemory("cpu: out of host memory allocating " + std::to_string(bytes) + " bytes");
    return p;
  }
  void raw_release(void* ptr) override { cpu::host_free(ptr); }
  void raw_copy_to_device(void* dst, const void* src, size_t bytes) override {
    std::memcpy(dst, src, bytes);
  }
  void raw_copy_to_host(void* dst, const void* src, size_t bytes) override {
    std::memcpy(dst, src, bytes);
  }
  size_t scratch_bytes() const override { return workspace_.bytes(); }
  size_t scratch_peak_bytes() const override { return workspace_.peak_bytes(); }

 private:
  // Runs f on the GEMM workspace and counts a growth as an allocation (the
  // execution model allows them only in the first step).
  template <typename F>
  void with_workspace(F&& f) {
    const size_t before = workspace_.bytes();
    f(workspace_);
    if (workspace_.bytes() != before) count_workspace_growth();
  }

  int threads_ = 1;
  cpu::Workspace workspace_;
};

}  // namespace

std::unique_ptr<Backend> make_cpu_backend(int threads) {
  return std::make_unique<CpuBackend>(threads);
}

}  // namespace srkit

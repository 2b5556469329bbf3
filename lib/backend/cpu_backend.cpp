// CpuBackend: host memory and the OpenMP/BLAS kernels of kernels/cpu.
#include <omp.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <new>

#include "kernels/cpu/adamw.h"
#include "kernels/cpu/ops.h"
#include "kernels/cpu/workspace.h"
#include "lib/backend/backend.h"

extern "C" void openblas_set_num_threads(int);

namespace srkit {
namespace {

// OpenMP threads that finished an op spin-wait by default (libgomp's "active"
// policy) on the very cores the next sgemm's OpenBLAS threads need; alternating
// OpenMP ops and BLAS calls, as every training step does, then runs 2-3x slower
// (measured: d4 bf16-sr 333 vs 1040 tok/s on 2 cores). The policy is read once
// when libgomp loads, before main, so a process that did not choose one
// re-executes itself once with OMP_WAIT_POLICY=passive. Setting the variable
// (to any value, e.g. active) keeps the choice and skips the re-exec.
__attribute__((constructor)) void prefer_passive_openmp_wait(int argc, char** argv, char**) {
  (void)argc;
  if (std::getenv("OMP_WAIT_POLICY") != nullptr || argv == nullptr) return;
  if (setenv("OMP_WAIT_POLICY", "passive", 1) != 0) return;
  execv("/proc/self/exe", argv);  // returns only on failure: carry on with the default policy
}

// Calls f with a value of the storage type named by dt (float or bf16).
template <typename F>
void dispatch(DType dt, F&& f) {
  if (dt == DType::kF32) {
    f(float{});
  } else {
    f(bf16{});
  }
}

template <typename T>
T* as(void* p) {
  return static_cast<T*>(p);
}
template <typename T>
const T* as(const void* p) {
  return static_cast<const T*>(p);
}

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

  std::string name() const override { return "cpu"; }
  std::string description() const override {
    return "CPU (" + std::to_string(threads_) + " OpenMP threads, OpenBLAS sgemm)";
  }

  void copy_to_device(void* dst, const void* src, size_t bytes) override {
    std::memcpy(dst, src, bytes);
  }
  void copy_to_host(void* dst, const void* src, size_t bytes) override {
    std::memcpy(dst, src, bytes);
  }
  void copy(void* dst, const void* src, size_t bytes) override { std::memcpy(dst, src, bytes); }
  void fill_zero(void* ptr, size_t bytes) override { std::memset(ptr, 0, bytes); }

  void encoder_forward(DType dt, void* out, const int32_t* tokens, const void* wte, const void* wpe,
                       int B, int T, int C) override {
    dispatch(dt, [&](auto tag) {
      using S = decltype(tag);
      cpu::encoder_forward<S>(as<S>(out), tokens, as<S>(wte), as<S>(wpe), B, T, C);
    });
  }
  void encoder_backward(DType dt, void* dwte, void* dwpe, const void* dout, const int32_t* tokens,
                        int B, int T, int C) override {
    dispatch(dt, [&](auto tag) {
      using S = decltype(tag);
      cpu::encoder_backward<S>(as<S>(dwte), as<S>(dwpe), as<S>(dout), tokens, B, T, C);
    });
  }
  void layernorm_forward(DType dt, void* out, float* mean, float* rstd, const void* inp,
                         const void* weight, const void* bias, int N, int C) override {
    dispatch(dt, [&](auto tag) {
      using S = decltype(tag);
      cpu::layernorm_forward<S>(as<S>(out), mean, rstd, as<S>(inp), as<S>(weight), as<S>(bias), N,
                                C);
    });
  }
  void layernorm_backward(DType dt, void* dinp, void* dweight, void* dbias, const void* dout,
                          const void* inp, const void* weight, const float* mean, const float* rstd,
                          int N, int C) override {
    dispatch(dt, [&](auto tag) {
      using S = decltype(tag);
      cpu::layernorm_backward<S>(as<S>(dinp), as<S>(dweight), as<S>(dbias), as<S>(dout), as<S>(inp),
                                 as<S>(weight), mean, rstd, N, C);
    });
  }
  void matmul_forward(DType dt, void* out, const void* inp, const void* weight, const void* bias,
                      int N, int C, int OC) override {
    dispatch(dt, [&](auto tag) {
      using S = decltype(tag);
      cpu::matmul_forward<S>(as<S>(out), as<S>(inp), as<S>(weight), as<S>(bias), N, C, OC,
                             workspace_);
    });
  }
  void matmul_backward(DType dt, void* dinp, void* dweight, void* dbias, const void* dout,
                       const void* inp, const void* weight, int N, int C, int OC) override {
    dispatch(dt, [&](auto tag) {
      using S = decltype(tag);
      cpu::matmul_backward<S>(as<S>(dinp), as<S>(dweight), as<S>(dbias), as<S>(dout), as<S>(inp),
                              as<S>(weight), N, C, OC, workspace_);
    });
  }
  void attention_forward(DType dt, void* out, void* preatt, void* att, const void* inp, int B,
                         int T, int C, int NH) override {
    dispatch(dt, [&](auto tag) {
      using S = decltype(tag);
      cpu::attention_forward<S>(as<S>(out), as<S>(preatt), as<S>(att), as<S>(inp), B, T, C, NH);
    });
  }
  void attention_backward(DType dt, void* dinp, void* dpreatt, void* datt, const void* dout,
                          const void* inp, const void* att, int B, int T, int C, int NH) override {
    dispatch(dt, [&](auto tag) {
      using S = decltype(tag);
      cpu::attention_backward<S>(as<S>(dinp), as<S>(dpreatt), as<S>(datt), as<S>(dout), as<S>(inp),
                                 as<S>(att), B, T, C, NH);
    });
  }
  void gelu_forward(DType dt, void* out, const void* inp, size_t n) override {
    dispatch(dt, [&](auto tag) {
      using S = decltype(tag);
      cpu::gelu_forward<S>(as<S>(out), as<S>(inp), n);
    });
  }
  void gelu_backward(DType dt, void* dinp, const void* inp, const void* dout, size_t n) override {
    dispatch(dt, [&](auto tag) {
      using S = decltype(tag);
      cpu::gelu_backward<S>(as<S>(dinp), as<S>(inp), as<S>(dout), n);
    });
  }
  void residual_forward(DType dt, void* out, const void* a, const void* b, size_t n) override {
    dispatch(dt, [&](auto tag) {
      using S = decltype(tag);
      cpu::residual_forward<S>(as<S>(out), as<S>(a), as<S>(b), n);
    });
  }
  void crossentropy_forward(DType dt, float* losses, const void* logits, const int32_t* targets,
                            int N, int V, int Vp) override {
    dispatch(dt, [&](auto tag) {
      using S = decltype(tag);
      cpu::crossentropy_forward<S>(losses, as<S>(logits), targets, N, V, Vp);
    });
  }
  void crossentropy_backward(DType dt, void* dlogits, const void* logits, const int32_t* targets,
                             float dloss, int N, int V, int Vp) override {
    dispatch(dt, [&](auto tag) {
      using S = decltype(tag);
      cpu::crossentropy_backward<S>(as<S>(dlogits), as<S>(logits), targets, dloss, N, V, Vp);
    });
  }
  double sum_squares(DType dt, const void* x, size_t n) override {
    double result = 0.0;
    dispatch(dt, [&](auto tag) {
      using S = decltype(tag);
      result = cpu::sum_squares<S>(as<S>(x), n);
    });
    return result;
  }

  void adamw_step(const AdamWRule& rule, const AdamWBuffers& buffers, const ParamSegment* segments,
                  size_t num_segments, size_t begin, size_t end, const AdamWHyper& hyper,
                  AdamWTelemetry* telemetry) override {
    cpu::adamw_step(rule, buffers, segments, num_segments, begin, end, hyper, telemetry);
  }

 protected:
  void* raw_allocate(size_t bytes) override {
    // 64-byte alignment: whole cache lines and aligned AVX loads.
    const size_t rounded = (bytes + 63) & ~size_t(63);
    void* p = std::aligned_alloc(64, rounded);
    if (p == nullptr)
      throw OutOfMemory("cpu: out of host memory allocating " + std::to_string(bytes) + " bytes");
    std::memset(p, 0, rounded);
    return p;
  }
  void raw_release(void* ptr) override { std::free(ptr); }
  size_t scratch_bytes() const override { return workspace_.bytes(); }
  size_t scratch_peak_bytes() const override { return workspace_.peak_bytes(); }

 private:
  int threads_ = 1;
  cpu::Workspace workspace_;
};

}  // namespace

std::unique_ptr<Backend> make_cpu_backend(int threads) {
  return std::make_unique<CpuBackend>(threads);
}

}  // namespace srkit

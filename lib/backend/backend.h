// The engine's view of a device: allocation with per-category accounting,
// copies, and one method per op. The model, optimizer and trainer talk only to
// this interface; CpuBackend always exists, a CUDA backend implements the same
// methods. Pointers are device pointers of the backend; DType says how the
// tensors an op touches are stored (fp32 arithmetic inside every op).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <unordered_map>

#include "kernels/common/adamw.h"
#include "kernels/common/dtype.h"

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

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;
  virtual std::string description() const = 0;

  // ---- memory: zero-initialised, accounted by category ----
  void* allocate(size_t bytes, MemCategory category);
  void release(void* ptr);
  MemoryStats memory() const;
  void set_memory_limit(size_t bytes) { limit_ = bytes; }  // 0 = none
  virtual void copy_to_device(void* dst, const void* host_src, size_t bytes) = 0;
  virtual void copy_to_host(void* host_dst, const void* src, size_t bytes) = 0;
  virtual void copy(void* dst, const void* src, size_t bytes) = 0;  // device to device
  virtual void fill_zero(void* ptr, size_t bytes) = 0;
  virtual void synchronize() {}

  // ---- model ops (see kernels/cpu/ops.h for shapes and conventions) ----
  virtual void encoder_forward(DType dt, void* out, const int32_t* tokens, const void* wte,
                               const void* wpe, int B, int T, int C) = 0;
  virtual void encoder_backward(DType dt, void* dwte, void* dwpe, const void* dout,
                                const int32_t* tokens, int B, int T, int C) = 0;
  virtual void layernorm_forward(DType dt, void* out, float* mean, float* rstd, const void* inp,
                                 const void* weight, const void* bias, int N, int C) = 0;
  virtual void layernorm_backward(DType dt, void* dinp, void* dweight, void* dbias,
                                  const void* dout, const void* inp, const void* weight,
                                  const float* mean, const float* rstd, int N, int C) = 0;
  virtual void matmul_forward(DType dt, void* out, const void* inp, const void* weight,
                              const void* bias, int N, int C, int OC) = 0;
  virtual void matmul_backward(DType dt, void* dinp, void* dweight, void* dbias, const void* dout,
                               const void* inp, const void* weight, int N, int C, int OC) = 0;
  virtual void attention_forward(DType dt, void* out, void* preatt, void* att, const void* inp,
                                 int B, int T, int C, int NH) = 0;
  virtual void attention_backward(DType dt, void* dinp, void* dpreatt, void* datt, const void* dout,
                                  const void* inp, const void* att, int B, int T, int C,
                                  int NH) = 0;
  virtual void gelu_forward(DType dt, void* out, const void* inp, size_t n) = 0;
  virtual void gelu_backward(DType dt, void* dinp, const void* inp, const void* dout, size_t n) = 0;
  virtual void residual_forward(DType dt, void* out, const void* a, const void* b, size_t n) = 0;
  virtual void crossentropy_forward(DType dt, float* losses, const void* logits,
                                    const int32_t* targets, int N, int V, int Vp) = 0;
  virtual void crossentropy_backward(DType dt, void* dlogits, const void* logits,
                                     const int32_t* targets, float dloss, int N, int V, int Vp) = 0;
  // Sum of squares in fp64, thread-count invariant (fixed chunk order).
  virtual double sum_squares(DType dt, const void* x, size_t n) = 0;

  // ---- optimizer: one fused AdamW pass over flat elements [begin, end) ----
  virtual void adamw_step(const AdamWRule& rule, const AdamWBuffers& buffers,
                          const ParamSegment* segments, size_t num_segments, size_t begin,
                          size_t end, const AdamWHyper& hyper, AdamWTelemetry* telemetry) = 0;

 protected:
  virtual void* raw_allocate(size_t bytes) = 0;  // zeroed; throws OutOfMemory
  virtual void raw_release(void* ptr) = 0;
  // Extra bytes the backend holds outside allocate() (e.g. kernel workspaces),
  // reported as scratch.
  virtual size_t scratch_bytes() const { return 0; }
  virtual size_t scratch_peak_bytes() const { return 0; }

 private:
  struct Allocation {
    size_t bytes;
    MemCategory category;
  };
  std::unordered_map<void*, Allocation> allocations_;
  MemoryStats stats_;
  size_t limit_ = 0;
};

std::unique_ptr<Backend> make_cpu_backend(int threads);
// Throws with the reason when the CUDA backend is not built or no device is present.
std::unique_ptr<Backend> make_backend(const std::string& device, int threads);

}  // namespace srkit

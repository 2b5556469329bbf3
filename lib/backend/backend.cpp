#include "lib/backend/backend.h"

#include <stdexcept>
#include <string>

namespace srkit {

const char* mem_category_name(MemCategory c) {
  switch (c) {
    case MemCategory::kWeights:
      return "weights";
    case MemCategory::kMaster:
      return "master";
    case MemCategory::kGrads:
      return "grads";
    case MemCategory::kOptState:
      return "opt_state";
    case MemCategory::kActivations:
      return "activations";
    case MemCategory::kScratch:
      return "scratch";
    case MemCategory::kCount:
      break;
  }
  return "?";
}

void check_grad_dtype(const char* op, DType dt, DType grad_dt) {
  if (grad_dt == dt || (dt == DType::kBF16 && grad_dt == DType::kF32)) return;
  throw std::invalid_argument(std::string(op) + ": " + dtype_name(grad_dt) +
                              " parameter gradients with " + dtype_name(dt) +
                              " activations (expected the same dtype, or f32 with bf16)");
}

static std::string mib(size_t bytes) {
  return std::to_string((bytes + (1u << 20) - 1) >> 20) + " MiB";
}

void* Backend::allocate(size_t bytes, MemCategory category) {
  ++counters_.allocations;
  if (limit_ != 0 && stats_.total_current + bytes > limit_) {
    throw OutOfMemory(name() + ": out of memory allocating " + mib(bytes) + " of " +
                      mem_category_name(category) + " (in use " + mib(stats_.total_current) +
                      ", limit " + mib(limit_) + ")");
  }
  void* ptr = raw_allocate(bytes == 0 ? 1 : bytes);
  allocations_[ptr] = Allocation{bytes, category};
  const int c = static_cast<int>(category);
  stats_.current[c] += bytes;
  stats_.total_current += bytes;
  if (stats_.current[c] > stats_.peak[c]) stats_.peak[c] = stats_.current[c];
  if (stats_.total_current > stats_.total_peak) stats_.total_peak = stats_.total_current;
  return ptr;
}

void Backend::release(void* ptr) {
  if (ptr == nullptr) return;
  auto it = allocations_.find(ptr);
  if (it == allocations_.end()) throw std::logic_error(name() + ": release of unknown pointer");
  const int c = static_cast<int>(it->second.category);
  stats_.current[c] -= it->second.bytes;
  stats_.total_current -= it->second.bytes;
  allocations_.erase(it);
  raw_release(ptr);
}

void Backend::copy_to_device(void* dst, const void* host_src, size_t bytes) {
  ++counters_.host_writes;
  raw_copy_to_device(dst, host_src, bytes);
}

void Backend::copy_to_host(void* host_dst, const void* src, size_t bytes) {
  ++counters_.host_reads;
  raw_copy_to_host(host_dst, src, bytes);
}

MemoryStats Backend::memory() const {
  MemoryStats s = stats_;
  const int scratch = static_cast<int>(MemCategory::kScratch);
  s.current[scratch] += scratch_bytes();
  s.peak[scratch] += scratch_peak_bytes();
  s.total_current += scratch_bytes();
  s.total_peak += scratch_peak_bytes();
  return s;
}

// ---- fused entry points: the plain ops in sequence ----

void Backend::matmul_bias_gelu_forward(DType dt, void* out, void* pre, const void* inp,
                                       const void* weight, const void* bias, int N, int C, int OC) {
  matmul_forward(dt, pre, inp, weight, bias, N, C, OC);
  gelu_forward(dt, out, pre, size_t(N) * size_t(OC));
}

void Backend::residual_layernorm_forward(DType dt, void* residual, void* ln, float* mean,
                                         float* rstd, const void* a, const void* b,
                                         const void* weight, const void* bias, int N, int C) {
  residual_forward(dt, residual, a, b, size_t(N) * size_t(C));
  layernorm_forward(dt, ln, mean, rstd, residual, weight, bias, N, C);
}

void Backend::classifier(DType dt, void* logits, float* losses, const int32_t* targets, float dloss,
                         int N, int V, int Vp) {
  crossentropy_forward(dt, losses, logits, targets, N, V, Vp);
  crossentropy_backward(dt, logits, logits, targets, dloss, N, V, Vp);
}

std::unique_ptr<Backend> make_backend(DeviceKind device, int threads) {
  if (device == DeviceKind::kCpu) return make_cpu_backend(threads);
#if defined(SRKIT_HAVE_CUDA)
  (void)threads;  // the device's threads are its own (and the emulation's TBB pool)
  return make_cuda_backend();
#else
  throw std::invalid_argument(
      "--device cuda: this build has no CUDA backend (configure with nvcc present, or "
      "-DSRKIT_CUDA_EMU=ON for the CPU emulation)");
#endif
}

std::unique_ptr<Backend> make_backend(const std::string& device, int threads) {
  return make_backend(parse_device_kind(device), threads);
}

}  // namespace srkit

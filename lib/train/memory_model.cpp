#include "lib/train/memory_model.h"

#include <omp.h>

#include <algorithm>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/cpu/gemm.h"
#include "kernels/cuda/scratch_sizes.h"
#include "lib/model/gpt.h"
#include "lib/model/param_layout.h"
#include "lib/train/data_parallel.h"

namespace srkit {

size_t MemoryEstimate::category(MemCategory c) const {
  switch (c) {
    case MemCategory::kWeights:
      return weights;
    case MemCategory::kMaster:
      return master;
    case MemCategory::kGrads:
      return grads;
    case MemCategory::kOptState:
      return moments + kahan;
    case MemCategory::kActivations:
      return activations;
    case MemCategory::kScratch:
      return scratch + step_record + compute_copies;
    case MemCategory::kCount:
      break;
  }
  return 0;
}

size_t zero_shard_elements(size_t total, int world) {
  if (world < 1)
    throw std::invalid_argument("--world must be >= 1 (got " + std::to_string(world) + ")");
  const size_t per_rank = (total + size_t(world) - 1) / size_t(world);
  const size_t aligned = (per_rank + kParamAlign - 1) / kParamAlign * kParamAlign;
  return std::min(aligned, total);
}

size_t cpu_gemm_scratch_bytes(const GPTConfig& config, DType dtype, int B, int T, int threads) {
  if (dtype == DType::kF32) return 0;
  const int n = B * T, c = config.channels, vp = config.padded_vocab_size();
  if (threads <= 0) threads = omp_get_max_threads();
  struct Gemm {
    int in, out;  // C -> OC
  };
  const Gemm gemms[] = {{c, 3 * c}, {c, c}, {c, 4 * c}, {4 * c, c}, {c, vp}};
  size_t floats = 0;
  for (const Gemm& g : gemms) {
    floats = std::max(floats, cpu::matmul_workspace_floats<bf16>(n, g.in, g.out, threads));
  }
  return sizeof(float) * floats;
}

size_t cuda_scratch_bytes(const GPTConfig& config, int B, int T, size_t shard_elements) {
  const int N = B * T, C = config.channels;
  // One per-call buffer shared by every op (they run in stream order), grown to
  // the largest request of a step, plus the cuBLASLt workspace.
  size_t per_call =
      std::max({cuda::layernorm_backward_scratch_bytes(N, C),
                cuda::sum_squares_scratch_bytes(shard_elements), cuda::encoder_plan_bytes(N)});
  for (int oc : {3 * C, C, 4 * C}) {  // the GEMMs with a bias gradient
    per_call = std::max(per_call, cuda::column_sums_scratch_bytes(N, oc));
  }
  return cuda::kGemmWorkspaceBytes + per_call;
}

namespace {

// ZeRO 2's reduce-scatter bucket: the gradients of the largest single tensor
// (one layer's slice of a stacked matrix, or the tied embedding wte, whose
// gradient accumulates until backward ends) wait there before being reduced.
size_t largest_tensor_elements(const ParamLayout& layout, int layers) {
  size_t largest = 0;
  for (const ParamTensor& t : layout.tensors()) {
    const bool stacked = t.name.rfind("h.", 0) == 0;
    largest = std::max(largest, stacked ? t.count / size_t(layers) : t.count);
  }
  return largest;
}

}  // namespace

MemoryEstimate estimate_memory(const MemoryScenario& s) {
  auto require = [](bool ok, const std::string& what) {
    if (!ok) throw std::invalid_argument(what);
  };
  s.model.validate();
  const int T = s.seq_len == 0 ? s.model.max_seq_len : s.seq_len;
  require(s.world >= 1, "--world must be >= 1 (got " + std::to_string(s.world) + ")");
  require(s.threads >= 0, "--threads must be >= 0 (got " + std::to_string(s.threads) + ")");
  require(s.zero >= 0 && s.zero <= 2,
          "--zero must be 0, 1 or 2 (got " + std::to_string(s.zero) + ")");
  require(s.batch >= 1, "--batches must be >= 1 (got " + std::to_string(s.batch) + ")");
  require(s.grad_accum >= 1,
          "--grad-accum must be >= 1 (got " + std::to_string(s.grad_accum) + ")");
  require(T >= 1 && T <= s.model.max_seq_len, "--seq-len " + std::to_string(T) + " outside [1, " +
                                                  std::to_string(s.model.max_seq_len) + "] for " +
                                                  s.model.name);
  const DeviceKind device = parse_device_kind(s.device);

  const ParamLayout layout(s.model);
  const AdamWArrayBytes per = adamw_array_bytes(s.strategy.rule);
  const size_t P = layout.total_size();
  const size_t shard = s.zero == 0 ? P : zero_shard_elements(P, s.world);
  const DType dt = s.strategy.compute;  // of activations and the CPU GEMMs

  MemoryEstimate e;
  e.shard_elements = shard;
  e.weights = P * per.weights;
  e.master = shard * per.master;
  e.moments = shard * (per.m + per.v);
  e.kahan = shard * per.kahan;
  size_t reduced = P;  // elements one gradient reduction covers
  if (s.zero == 2) {
    const size_t bucket = largest_tensor_elements(layout, s.model.num_layers);
    e.grads = (shard + bucket) * per.grads;
    reduced = bucket;
  } else {
    e.grads = P * per.grads;
    if (s.zero == 1) reduced = shard * size_t(s.world);
  }
  // What the model allocates, with or without recomputation (GPT::set_recompute).
  e.activations = GPT::activation_bytes(s.model, dt, s.batch, T, device, s.recompute);
  e.step_record =
      DataParallel::step_buffer_bytes(s.world, s.grad_accum, layout.group_ranges().size());
  e.compute_copies = size_t(s.strategy.transient_bytes_per_param() * double(P));
  if (device == DeviceKind::kCuda) {
    e.scratch = cuda_scratch_bytes(s.model, s.batch, T, shard);
  }
  if (device == DeviceKind::kCpu) {
    e.scratch = cpu_gemm_scratch_bytes(s.model, dt, s.batch, T, s.threads);
    // The MPI communicator's rank-order reduction receives every rank's block
    // of this rank's share: W slots of ceil(n / W) elements (one unused).
    if (s.world > 1) {
      const size_t block = (reduced + size_t(s.world) - 1) / size_t(s.world);
      e.comm = size_t(s.world) * block * per.grads;
    }
  }
  return e;
}

}  // namespace srkit

// An analytic model of training memory per data-parallel rank: for a model
// shape, precision strategy, world size, ZeRO stage, micro-batch, sequence
// length and activation recomputation, the bytes of every kind of buffer.
//
// Where the engine implements the scenario (ZeRO 0 and 1, with or without
// recomputation, any accumulation)
// the terms are the engine's own allocations, not approximations:
//   weights, grads      the flat buffers, ParamLayout::total_size() elements
//                       (alignment padding included) x the weight dtype;
//   master, moments,    the optimizer's arrays for its shard
//   kahan               (adamw_array_bytes of the strategy's rule);
//   activations         GPT::activation_buffers(), the list the model allocates
//                       (with what the device's attention keeps, attention_sizes);
//   scratch             the backend's workspaces (cpu_gemm_scratch_bytes,
//                       cuda_scratch_bytes)
//                       and the step record (DataParallel::step_buffer_bytes), plus
//                       O1's compute copies of weights and gradients (the amp preset);
//   comm                the MPI communicator's receive buffer (CPU ranks) or
//                       nothing (NCCL reduces in place on GPUs).
// ZeRO 2 is a model of what that design would hold; the engine does not
// implement it (see estimate_memory for the formula).
#pragma once

#include <cstddef>
#include <string>

#include "lib/backend/backend.h"
#include "lib/model/gpt_config.h"
#include "lib/precision.h"

namespace srkit {

struct MemoryScenario {
  GPTConfig model;
  PrecisionStrategy strategy;
  int world = 1;           // data-parallel ranks
  int zero = 0;            // 0 replicated; 1 optimizer state sharded; 2 also gradients
  int batch = 1;           // micro-batch: sequences per rank per forward
  int seq_len = 0;         // tokens per sequence; 0 = the model's maximum
  bool recompute = false;  // activation recomputation (GPT::set_recompute), as allocated
  int grad_accum = 1;  // micro-batches per optimizer step (the step record holds each one's loss)
  std::string device = "cpu";  // whose scratch and communication buffers: cpu or cuda
  int threads = 0;             // CPU threads (the GEMM scratch is per thread); 0: OpenMP default
};

struct MemoryEstimate {
  size_t weights = 0, master = 0, grads = 0, moments = 0, kahan = 0;
  size_t activations = 0, scratch = 0, comm = 0;
  size_t step_record = 0;     // the data-parallel step record (allocated as scratch)
  size_t compute_copies = 0;  // O1's compute copies of weights and gradients (scratch)
  size_t shard_elements = 0;  // flat elements this rank's optimizer updates

  // What Backend::allocate() accounts (Backend::memory() without the GEMM scratch).
  size_t accounted() const {
    return weights + master + grads + moments + kahan + activations + step_record + compute_copies;
  }
  // Backend::memory().total_peak: accounted() + scratch.
  size_t backend_total() const { return accounted() + scratch; }
  size_t total() const { return backend_total() + comm; }
  // The term(s) the backend reports under category c (kOptState = moments + kahan).
  size_t category(MemCategory c) const;
};

// Throws std::invalid_argument naming the flag (--world, --zero, --batches,
// --seq-len, --device) on an impossible scenario.
MemoryEstimate estimate_memory(const MemoryScenario& scenario);

// Elements of the largest ZeRO shard (rank 0's) when `total` flat elements are
// split over `world` ranks in whole kParamAlign groups, so no 8-element Philox
// group is split; the last shard may be shorter.
size_t zero_shard_elements(size_t total, int world);

// The CPU backend's GEMM scratch high-water mark for one training step with
// `threads` OpenMP threads (0: omp_get_max_threads()). bf16 GEMMs widen, per
// thread, the operand panels of one output tile into an fp32 workspace
// (kernels/cpu/gemm_tiles.h); the workspace grows to the largest call's need and is
// kept, so the peak is the largest cpu::matmul_workspace_floats over the
// model's GEMMs (N = B*T rows; C->3C, C->C, C->4C, 4C->C, C->Vp), 4 bytes
// each. fp32 GEMMs work on the arrays: 0.
size_t cpu_gemm_scratch_bytes(const GPTConfig& config, DType dtype, int B, int T, int threads);

// The CUDA backend's scratch for one training step: the cuBLASLt workspace and
// its one per-call buffer, grown to the largest request of a step (LayerNorm's
// and the biases' gradient partials, the gradient norm's partials over the
// optimizer's shard, the embedding backward's plan; kernels/cuda/scratch_sizes.h).
// Not counted: the AdamW plan (at most 48 KiB + 16 bytes per decay run).
size_t cuda_scratch_bytes(const GPTConfig& config, int B, int T, size_t shard_elements);

}  // namespace srkit

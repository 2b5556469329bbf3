// Fused causal self-attention on a CUDA device (kernels/cuda/flash_attention.cu
// forward, flash_attention_backward.cu backward): tiles of queries against
// tiles of keys and values in shared memory, through the warp-level bf16
// tensor-core fragments of kernels/cuda/mma_fragment.cuh, with fp32
// accumulation and an online softmax, so no [T,T] matrix is ever stored.
// kernels/cuda/attention.cu's attention_forward/backward take this path for
// the shapes flash_attention_supported accepts.
//
// Contract of both launchers:
//   - dt must be DType::kBF16 and the head size hs = C / NH one of 64, 128
//     (flash_attention_supported says whether a shape qualifies); any B, T, NH
//     > 0. Otherwise they throw std::invalid_argument.
//   - Every tensor is row-major bf16 in device memory, 16-byte aligned (they
//     throw otherwise): qkv [B,T,3C] with q at channel 0, k at C, v at 2C and
//     head h at channels h*hs .. h*hs+hs-1 of each part (as the QKV matmul
//     writes it); out and dout [B,T,C], head h at channels h*hs...; dqkv
//     [B,T,3C] laid out as qkv. lse and the scratch are fp32 arrays (4-byte
//     aligned).
//   - State: forward writes lse [B,NH,T] fp32, each row's log-sum-exp of its
//     scaled scores, flash_attention_state_bytes() bytes; backward reads it
//     and forward's out, and recomputes the probabilities from them.
//   - Scratch: backward needs flash_attention_backward_scratch_bytes() bytes
//     of device memory (the [B,NH,T] fp32 rowsum(dout * out)), contents
//     irrelevant on entry and afterwards; forward needs none.
//   - Everything is queued on `stream`; nothing is allocated and no host
//     synchronisation happens.
//
// Numerics: scores are (q . k) / sqrt(hs) in fp32 from bf16 operands; keys
// after the query (and past T) are masked, and tiles wholly above the diagonal
// are never computed. The softmax runs online over key tiles in increasing key
// order: per row a running maximum m and sum l in fp32; each tile's
// probabilities exp_poly(s - m) (kernels/common/math.h) are rounded to bf16
// (the operand of the P V product, and what l sums), and the accumulator is
// rescaled by exp_poly(m_old - m_new) when the maximum grows; out = acc / l,
// rounded once to bf16, lse = m + log(l). Backward (FlashAttention-2's
// split): D = rowsum(dout * out), then one block per key tile accumulates dK
// and dV over the query tiles in increasing order, and one block per query tile
// accumulates dQ over the key tiles in increasing order, each recomputing
// P = exp_poly(s - lse) in fp32; every gradient element is summed by one thread
// in a fixed order and rounded once (no atomics): the same inputs give the same
// bits on every run.
#pragma once

#include <cstddef>

#include "kernels/common/dtype.h"
#include "kernels/common/grad_write.h"
#include "kernels/cuda/attention_layout.h"
#include "kernels/cuda/stream.h"

namespace srkit::cuda {

// flash_attention_supported, flash_attention_state_bytes and
// flash_attention_backward_scratch_bytes: kernels/cuda/attention_layout.h,
// which sizes the model's buffers without the CUDA backend being built.

// out [B,T,C] = causal softmax(q k^T / sqrt(hs)) v per head; lse [B,NH,T].
void flash_attention_forward(DType dt, void* out, float* lse, const void* qkv, int B, int T, int C,
                             int NH, Stream stream);

// dqkv [B,T,3C]: the gradients of q, k and v, written (kOverwrite) or added
// to what dqkv holds (kAccumulate), rounded once either way. out and lse are
// forward's; scratch: flash_attention_backward_scratch_bytes() bytes.
void flash_attention_backward(DType dt, void* dqkv, GradWrite dqkv_mode, const void* dout,
                              const void* qkv, const void* out, const float* lse, void* scratch,
                              int B, int T, int C, int NH, Stream stream);

}  // namespace srkit::cuda

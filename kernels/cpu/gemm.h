// The linear layers on the CPU (out = inp @ weight^T + bias and its backward),
// over the tiled BLAS engine of kernels/cpu/gemm_tiles.h.
// Shapes, storage types and gradient-write conventions: kernels/cpu/elements.h;
// the CUDA launcher of the same name is kernels/cuda/gemm.h, the op table
// docs/architecture.md ("Ops").
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/cpu/elements.h"

namespace srkit::cpu {

// out[N,OC] = inp[N,C] @ weight[OC,C]^T (+ bias[OC] if not null): fp32
// accumulation over the whole of C, the bias added to the finished fp32 sum,
// one rounding per output element for bf16. The output is cut into tiles of a
// geometry fixed by the shape, each one single-threaded BLAS call
// (kernels/cpu/gemm_tiles.h), so the bits do not depend on the thread count. bf16
// operands are widened panel by panel in the workspace: see
// matmul_workspace_floats.
template <typename T>
void matmul_forward(T* out, const T* inp, const T* weight, const T* bias, int N, int C, int OC,
                    Workspace& ws);
// dinp[N,C] += dout @ weight; dweight[OC,C] += dout^T @ inp; dbias[OC] += sum_n dout
// (dbias may be null; its column sums add the rows in order, in fp32). For bf16:
// the product is added to the widened old value in fp32, then rounded once.
// With accumulate_dinp (accumulate_params) false, dinp (dweight and dbias) is
// written as if it had been zero: the product alone (bf16: rounded once), the
// old contents ignored (they may be anything, NaN included).
template <typename T, typename G>
void matmul_backward(T* dinp, G* dweight, G* dbias, const T* dout, const T* inp, const T* weight,
                     int N, int C, int OC, Workspace& ws, bool accumulate_dinp = true,
                     bool accumulate_params = true);

// Floats of workspace the matmul ops hold for this shape with `threads`
// OpenMP threads (the larger of forward and backward; the workspace grows to
// it on the first call and stays): for bf16, per thread the widened operand
// panels and the fp32 tile of one output tile; 0 for fp32.
template <typename T>
size_t matmul_workspace_floats(int N, int C, int OC, int threads);

}  // namespace srkit::cpu

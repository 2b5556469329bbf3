// Element-wise ops and the gather on a CUDA device
// (kernels/cuda/pointwise.cu), callable from plain C++. Each element goes
// through the same function as the CPU op (kernels/common), in the same order,
// so results equal the CPU backend's bit for bit. Pointers are device
// pointers; dt names the storage of every tensor of the op (fp32 arithmetic);
// work is queued on `stream`. Shapes and conventions: kernels/cpu/elements.h.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/common/dtype.h"
#include "kernels/common/grad_write.h"
#include "kernels/cuda/stream.h"

namespace srkit::cuda {

void gelu_forward(DType dt, void* out, const void* inp, size_t n, Stream stream);
// dinp (+)= dout * gelu'(inp)
void gelu_backward(DType dt, void* dinp, GradWrite dinp_mode, const void* inp, const void* dout,
                   size_t n, Stream stream);

void residual_forward(DType dt, void* out, const void* a, const void* b, size_t n, Stream stream);

// dst[j] = the elem_bytes-wide element src[indices[j]] (elem_bytes 2 or 4).
void gather(void* dst, const void* src, size_t elem_bytes, const uint64_t* indices, size_t n,
            Stream stream);

}  // namespace srkit::cuda

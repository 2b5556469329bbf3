// The token and position embedding on the CPU: the lookup forward, the
// per-token sums backward.
// Shapes, storage types and gradient-write conventions: kernels/cpu/elements.h;
// the CUDA launcher of the same name is kernels/cuda/encoder.h, the op table
// docs/architecture.md ("Ops").
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/cpu/elements.h"

namespace srkit::cpu {

// out[b,t,:] = wte[tokens[b,t],:] + wpe[t,:]. Tokens must lie in [0, rows of wte).
template <typename T>
void encoder_forward(T* out, const int32_t* tokens, const T* wte, const T* wpe, int B, int Tn,
                     int C);
// dwte[tok] += sum of dout over the positions holding tok (positions in order);
// dwpe[t] += sum over b of dout[b,t]. Accumulates: both tables have rows no
// position touches (the model clears dwpe and writes dwte first elsewhere).
template <typename T, typename G>
void encoder_backward(G* dwte, G* dwpe, const T* dout, const int32_t* tokens, int B, int Tn, int C);

}  // namespace srkit::cpu

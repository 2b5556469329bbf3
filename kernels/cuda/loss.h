// Softmax cross-entropy over the first V of Vp logits per row on a CUDA device
// (kernels/cuda/loss.cu), and the loss mean. Same formulas and element
// functions as the CPU ops (kernels/cpu/loss.cpp); the row reductions run
// in a fixed order of their own (deterministic). targets[i] < 0 means ignore;
// targets >= V are the caller's error (GPT checks them on the host), and the
// kernels never read out of bounds for them (such rows are treated as ignored).
#pragma once

#include <cstdint>

#include "kernels/common/dtype.h"
#include "kernels/cuda/stream.h"

namespace srkit::cuda {

void crossentropy_forward(DType dt, float* losses, const void* logits, const int32_t* targets,
                          int N, int V, int Vp, Stream stream);
// Overwrites dlogits (may alias logits); padding columns and ignored rows 0.
void crossentropy_backward(DType dt, void* dlogits, const void* logits, const int32_t* targets,
                           float dloss, int N, int V, int Vp, Stream stream);
// Both in one pass over each row, dlogits in place of the logits: the same
// bits as crossentropy_forward then crossentropy_backward.
void classifier(DType dt, void* logits, float* losses, const int32_t* targets, float dloss, int N,
                int V, int Vp, Stream stream);

// Whether crossentropy_backward and classifier keep rows of Vp columns in
// shared memory on the current device (one exp_poly a column instead of two,
// kernels/cuda/loss.cu): Vp a multiple of 8 and Vp floats within the block's
// opt-in limit. Rows must also be 16-byte aligned for it.
bool crossentropy_stages_rows(int Vp);

// *out = (sum of losses[i] over rows whose target is >= 0) / count in fp64, in
// a fixed order (0 when count is 0).
void mean_loss(const float* losses, const int32_t* targets, int N, int count, double* out,
               Stream stream);

}  // namespace srkit::cuda

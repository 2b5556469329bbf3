// Runtime dtype to compile-time storage type: the one place that maps a DType
// (or a pair of them) to the float/bf16 a templated kernel is instantiated
// for. Host code only; used by the CPU backend and the CUDA launchers alike.
#pragma once

#include "kernels/common/bf16.h"
#include "kernels/common/dtype.h"

namespace srkit {

// f(T{}) with T = float or bf16, the storage type dt names.
template <typename F>
void with_dtype(DType dt, F&& f) {
  if (dt == DType::kF32) {
    f(float{});
  } else {
    f(bf16{});
  }
}

// f(T{}, G{}) with the activation type dt and the parameter-gradient type
// grad_dt names: float/float, bf16/bf16 or bf16/float (callers check the pair
// first: check_grad_dtype in lib/backend/backend.h).
template <typename F>
void with_grad_dtypes(DType dt, DType grad_dt, F&& f) {
  if (dt == DType::kF32) {
    f(float{}, float{});
  } else if (grad_dt == DType::kF32) {
    f(bf16{}, float{});
  } else {
    f(bf16{}, bf16{});
  }
}

}  // namespace srkit

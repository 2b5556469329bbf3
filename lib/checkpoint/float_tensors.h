// Floating-point tensor elements between the safetensors dtypes srkit reads
// (F32, F16, BF16) and the storage dtypes it computes with (f32, bf16).
// Widening is exact; narrowing to bf16 rounds to nearest, ties to even (RN),
// so a conversion is a pure function of its input (no seed, no SR). Between
// equal dtypes the bits are copied unchanged.
#pragma once

#include <cstddef>
#include <string>

#include "kernels/common/dtype.h"

namespace srkit {

// "F32" or "BF16": the safetensors name of a storage dtype.
const char* safetensors_dtype_of(DType dtype);

// F32, F16 and BF16: the dtypes convert_float_elements reads.
bool is_convertible_float_dtype(const std::string& safetensors_dtype);

// n elements of src (safetensors dtype src_dtype) into dst as dst_dtype.
// Throws std::invalid_argument naming src_dtype if it is not F32, F16 or BF16.
void convert_float_elements(const void* src, const std::string& src_dtype, void* dst,
                            DType dst_dtype, size_t n);

}  // namespace srkit

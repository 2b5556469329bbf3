// Comparisons of the conformance suite: element-wise tolerances (absolute +
// relative, bf16 ulps), bit-for-bit equality with the first differing element,
// and the two GradWrite contracts (kOverwrite ignores what the buffer held,
// kAccumulate adds to it).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "kernels/common/bf16.h"
#include "kernels/common/dtype.h"

namespace srkit::conformance {

// The allowed |got - want| for element j whose reference value is want.
using Tolerance = std::function<double(size_t j, double want)>;

inline Tolerance abs_rel(double atol, double rtol) {
  return [=](size_t, double want) { return atol + rtol * std::fabs(want); };
}
// `ulps` bf16 ulps at the reference's magnitude, plus atol.
inline Tolerance bf16_ulps(double ulps, double atol = 0.0) {
  return [=](size_t, double want) { return ulps * double(bf16_ulp(float(want))) + atol; };
}
// The tolerance a value stored in dt adds to an fp32 computation's `f32`: one
// rounding to bf16 (half an ulp, one across a binade boundary) for bf16, none
// for fp32.
inline Tolerance plus_storage(DType dt, Tolerance f32) {
  if (dt == DType::kF32) return f32;
  return [f32](size_t j, double want) { return f32(j, want) + double(bf16_ulp(float(want))); };
}

template <typename A, typename B>
::testing::AssertionResult all_within(const std::vector<A>& got, const std::vector<B>& want,
                                      const Tolerance& tol) {
  if (got.size() != want.size()) {
    return ::testing::AssertionFailure()
           << "size " << got.size() << " != reference size " << want.size();
  }
  size_t bad = 0, first = 0;
  double worst_ratio = 0.0;
  size_t worst = 0;
  for (size_t j = 0; j < got.size(); ++j) {
    const double g = double(got[j]), w = double(want[j]);
    const double t = tol(j, w);
    const double err = std::fabs(g - w);
    const bool ok = err <= t;  // false for NaN
    if (!ok) {
      if (bad == 0) first = j;
      ++bad;
    }
    const double ratio = std::isnan(err) ? INFINITY : err / std::max(t, 1e-300);
    if (ratio > worst_ratio) {
      worst_ratio = ratio;
      worst = j;
    }
  }
  if (bad == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << bad << " of " << got.size() << " elements out of tolerance; first [" << first
         << "] got " << double(got[first]) << " want " << double(want[first]) << " (tol "
         << tol(first, double(want[first])) << "); worst [" << worst << "] got "
         << double(got[worst]) << " want " << double(want[worst]) << " (tol "
         << tol(worst, double(want[worst])) << ")";
}

// Byte-for-byte equality of two stored arrays of elem_bytes-wide elements.
inline ::testing::AssertionResult same_bits(const std::vector<uint8_t>& got,
                                            const std::vector<uint8_t>& want,
                                            size_t elem_bytes = 1) {
  if (got.size() != want.size()) {
    return ::testing::AssertionFailure() << got.size() << " bytes != " << want.size();
  }
  size_t bad = 0, first = 0;
  for (size_t j = 0; j < got.size(); j += elem_bytes) {
    if (std::memcmp(&got[j], &want[j], elem_bytes) != 0) {
      if (bad == 0) first = j / elem_bytes;
      ++bad;
    }
  }
  if (bad == 0) return ::testing::AssertionSuccess();
  std::ostringstream hex;
  auto show = [&](const std::vector<uint8_t>& v) {
    hex << "0x";
    for (size_t b = elem_bytes; b-- > 0;) {  // little-endian element as one number
      static const char* digits = "0123456789abcdef";
      const uint8_t x = v[first * elem_bytes + b];
      hex << digits[x >> 4] << digits[x & 15];
    }
  };
  show(got);
  hex << " != ";
  show(want);
  return ::testing::AssertionFailure()
         << bad << " of " << got.size() / elem_bytes << " elements differ; first at [" << first
         << "]: " << hex.str();
}

// The bytes of fp32 values, for same_bits (bf16 values widen exactly, so a
// widened tensor compares bit for bit too).
inline std::vector<uint8_t> float_bytes(const std::vector<float>& v) {
  std::vector<uint8_t> out(v.size() * sizeof(float));
  if (!v.empty()) std::memcpy(out.data(), v.data(), out.size());
  return out;
}

template <typename T>
::testing::AssertionResult no_nan(const std::vector<T>& v) {
  for (size_t j = 0; j < v.size(); ++j) {
    if (std::isnan(double(v[j]))) {
      return ::testing::AssertionFailure()
             << "NaN at [" << j << "] of " << v.size() << " (an element the op did not write?)";
    }
  }
  return ::testing::AssertionSuccess();
}

template <typename T>
double max_abs(const std::vector<T>& v) {
  double m = 0.0;
  for (const T& x : v) m = std::max(m, std::fabs(double(x)));
  return m;
}

// kAccumulate adds to the buffer: `accumulated` (written into a buffer holding
// `old`) equals `overwritten` (the same call with kOverwrite) + old within one
// rounding. bf16: RN(old + d) against old + RN(d) differs by at most half an
// ulp of each rounded value, i.e. one ulp of the larger. fp32: the two stores
// round once each, and a backend may fold old into its sum at another point of
// the order (a GEMM with beta = 1), so kAccumulateF32Rel of the magnitudes
// involved plus kAccumulateF32Rel of the tensor's largest contribution.
constexpr double kAccumulateF32Rel = 1e-6;

inline ::testing::AssertionResult accumulates(DType dt, const std::vector<float>& accumulated,
                                              const std::vector<float>& overwritten,
                                              const std::vector<float>& old) {
  if (accumulated.size() != old.size() || overwritten.size() != old.size()) {
    return ::testing::AssertionFailure() << "size mismatch";
  }
  std::vector<double> want(old.size());
  for (size_t j = 0; j < old.size(); ++j) want[j] = double(old[j]) + double(overwritten[j]);
  const double scale = max_abs(overwritten);
  Tolerance tol;
  if (dt == DType::kF32) {
    tol = [&](size_t j, double) {
      return kAccumulateF32Rel * (std::fabs(old[j]) + std::fabs(overwritten[j]) + scale);
    };
  } else {
    tol = [&](size_t j, double) {
      return 0.5 * double(bf16_ulp(accumulated[j])) + 0.5 * double(bf16_ulp(overwritten[j]));
    };
  }
  return all_within(accumulated, want, tol);
}

// Values equal as numbers (+0 == -0; NaN never equal).
inline ::testing::AssertionResult same_values(const std::vector<float>& got,
                                              const std::vector<float>& want) {
  return all_within(got, want, [](size_t, double) { return 0.0; });
}

}  // namespace srkit::conformance

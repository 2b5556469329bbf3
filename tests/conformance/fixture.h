// The fixtures of the conformance suite: each test opens the backend named by
// its parameter through make_backend() (the one factory the programs use) and
// skips, with the runtime's reason, when that device is not available. When the
// device is not the CPU, a CPU backend is opened too: the reference the device
// is compared against (tolerances.h). Setting SRKIT_CONFORMANCE_CPU_REFERENCE=1
// opens that reference for the cpu instance as well, which runs every
// cross-device comparison on a machine without a GPU (CPU against CPU).
#pragma once

#include <gtest/gtest.h>

#include <cctype>
#include <cstdlib>
#include <exception>
#include <memory>
#include <ostream>
#include <string>
#include <tuple>
#include <vector>

#include "kernels/common/dtype.h"
#include "lib/backend/backend.h"
#include "lib/precision.h"
#include "tests/test_ops_util.h"

namespace srkit {
// Test parameters print as "f32" / "bf16".
inline void PrintTo(DType dt, std::ostream* os) { *os << dtype_name(dt); }
}  // namespace srkit

namespace srkit::conformance {

inline bool cpu_reference_forced() {
  const char* e = std::getenv("SRKIT_CONFORMANCE_CPU_REFERENCE");
  return e != nullptr && *e != '\0' && std::string(e) != "0";
}

class BackendUnderTest {
 protected:
  // Call from SetUp(): a GTEST_SKIP here skips the test body.
  void open(const std::string& device) {
    device_ = device;
    try {
      backend_ = make_backend(device, 0);
    } catch (const std::exception& e) {
      GTEST_SKIP() << "no " << device << " backend: " << e.what();
    }
    if (device != "cpu" || cpu_reference_forced()) reference_ = make_cpu_backend(0);
  }

  Backend& be() { return *backend_; }
  // The CPU backend to compare with, or nullptr when the device is the CPU.
  Backend* cpu_reference() { return reference_.get(); }
  const std::string& device() const { return device_; }
  // The backends a test runs an op on: the one under test first, then the reference.
  std::vector<Backend*> backends() {
    std::vector<Backend*> v{backend_.get()};
    if (reference_) v.push_back(reference_.get());
    return v;
  }

 private:
  std::string device_;
  std::unique_ptr<Backend> backend_, reference_;
};

// Ops without a storage dtype (convert, copies, reductions to fp64, gather).
class BackendOps : public ::testing::TestWithParam<std::string>, public BackendUnderTest {
 protected:
  void SetUp() override { open(GetParam()); }
};

// Ops with a storage dtype: every test runs for fp32 and bf16 storage.
class BackendOpsDtype : public ::testing::TestWithParam<std::tuple<std::string, DType>>,
                        public BackendUnderTest {
 protected:
  void SetUp() override { open(std::get<0>(GetParam())); }
  DType dt() const { return std::get<1>(GetParam()); }
  bool bf16() const { return dt() == DType::kBF16; }
  // n inputs uniform in [lo, hi), fixed by the seed; bf16-representable when
  // the storage is bf16, so the host reference sees exactly what the op reads.
  std::vector<float> inputs(size_t n, uint64_t seed, float lo = -1.0f, float hi = 1.0f) const {
    auto v = srkit::testing::random_vec(n, seed, lo, hi);
    return bf16() ? srkit::testing::bf16_representable(std::move(v)) : v;
  }
};

// Tests that also take a precision strategy (a preset name or spec).
class BackendStrategy : public ::testing::TestWithParam<std::tuple<std::string, std::string>>,
                        public BackendUnderTest {
 protected:
  void SetUp() override { open(std::get<0>(GetParam())); }
  PrecisionStrategy strategy() const { return strategy_from_string(std::get<1>(GetParam())); }
};
// The AdamW step of every weight and moment mode.
class BackendAdamW : public BackendStrategy {};
// The whole model (tests/conformance/backend_model_suite.h).
class BackendModel : public BackendStrategy {};

inline std::string sanitize(const std::string& s) {
  std::string out;
  for (char c : s) out += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  return out;
}

inline std::string device_name(const ::testing::TestParamInfo<std::string>& info) {
  return sanitize(info.param);
}
inline std::string dtype_param_name(
    const ::testing::TestParamInfo<std::tuple<std::string, DType>>& info) {
  return dtype_name(std::get<1>(info.param));
}
inline std::string spec_param_name(
    const ::testing::TestParamInfo<std::tuple<std::string, std::string>>& info) {
  return sanitize(std::get<1>(info.param));
}

}  // namespace srkit::conformance

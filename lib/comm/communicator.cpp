#include "lib/comm/communicator.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <thread>

#include "kernels/common/bf16.h"

namespace srkit {

namespace {

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// acc[i] = widen(src[i]) (first) or acc[i] + widen(src[i]) (add).
template <bool kFirst>
void accumulate(float* acc, const void* src, size_t m, DType dtype) {
  if (dtype == DType::kF32) {
    const float* s = static_cast<const float*>(src);
    for (size_t i = 0; i < m; ++i) acc[i] = kFirst ? s[i] : acc[i] + s[i];
  } else {
    const bf16* s = static_cast<const bf16*>(src);
    for (size_t i = 0; i < m; ++i) {
      const float x = bf16_to_float(s[i]);
      acc[i] = kFirst ? x : acc[i] + x;
    }
  }
}

const char* byte_offset(const void* p, size_t elements, DType dtype) {
  return static_cast<const char*>(p) + elements * dtype_size(dtype);
}

}  // namespace

Communicator::Timed::Timed(Communicator* c) : c_(c), start_(now_seconds()) {}
Communicator::Timed::~Timed() { c_->comm_seconds_ += now_seconds() - start_; }

namespace {
constexpr auto kSpinWindow = std::chrono::milliseconds(2);
constexpr auto kMinNap = std::chrono::microseconds(20);
constexpr auto kMaxNap = std::chrono::microseconds(1000);
}  // namespace

PollBackoff::PollBackoff(double timeout_s)
    : start_(std::chrono::steady_clock::now()), timeout_(timeout_s), nap_(kMinNap) {}

bool PollBackoff::pause(bool progressed) {
  if (progressed) {
    nap_ = kMinNap;
    return true;
  }
  const auto waited = std::chrono::steady_clock::now() - start_;
  if (timeout_.count() > 0 && waited >= timeout_) return false;
  if (waited < kSpinWindow) {
    std::this_thread::yield();
  } else {
    std::this_thread::sleep_for(nap_);
    nap_ = std::min(nap_ * 2, kMaxNap);
  }
  return true;
}

void reduce_in_rank_order(const void* const* parts, int nparts, void* out, size_t n, DType dtype,
                          ReduceOp op) {
  if (nparts < 1) {
    throw std::invalid_argument("reduce_in_rank_order: need at least one part, got " +
                                std::to_string(nparts));
  }
  const float scale = 1.0f / static_cast<float>(nparts);
  // A tile of fp32 accumulators stays in L1 while each part streams through it,
  // and lets out alias a part (the tile is stored after all its reads).
  constexpr size_t kTile = 1024;
  float acc[kTile];
  for (size_t t0 = 0; t0 < n; t0 += kTile) {
    const size_t m = std::min(kTile, n - t0);
    accumulate<true>(acc, byte_offset(parts[0], t0, dtype), m, dtype);
    for (int q = 1; q < nparts; ++q) {
      accumulate<false>(acc, byte_offset(parts[q], t0, dtype), m, dtype);
    }
    if (op == ReduceOp::kMean) {
      for (size_t i = 0; i < m; ++i) acc[i] = acc[i] * scale;
    }
    if (dtype == DType::kF32) {
      std::memcpy(static_cast<float*>(out) + t0, acc, m * sizeof(float));
    } else {
      bf16* o = static_cast<bf16*>(out) + t0;
      for (size_t i = 0; i < m; ++i) o[i] = float_to_bf16_rn(acc[i]);
    }
  }
}

int launcher_world_size(std::string* source) {
  static const char* const kVars[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "MV2_COMM_WORLD_SIZE",
                                      "SLURM_STEP_NUM_TASKS"};
  for (const char* var : kVars) {
    const char* value = std::getenv(var);
    if (value == nullptr || *value == '\0') continue;
    char* end = nullptr;
    const long w = std::strtol(value, &end, 10);
    if (*end != '\0' || w < 1 || w > (1 << 24)) {
      throw std::invalid_argument(std::string("environment variable ") + var + "='" + value +
                                  "': expected a positive world size");
    }
    if (source) *source = var;
    return static_cast<int>(w);
  }
  if (source) source->clear();
  return 1;
}

}  // namespace srkit

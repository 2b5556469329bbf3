// CUDA array casts (kernels/cuda/cast.h) against the CPU kernels, bit for bit,
// on random bit patterns including specials. Skips with the reason when no
// CUDA device is usable.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/common/bf16.h"
#include "kernels/common/sr_bits.h"
#include "kernels/cpu/cast.h"
#include "kernels/cuda/cast.h"
#include "kernels/cuda/device.h"

namespace srkit {
namespace {

constexpr RngPurpose kPurpose = RngPurpose::kCast;

// Device buffer of n elements of T, freed on scope exit.
template <typename T>
class DeviceArray {
 public:
  explicit DeviceArray(size_t n) : n_(n), p_(static_cast<T*>(cuda::device_malloc(bytes()))) {}
  explicit DeviceArray(const std::vector<T>& host) : DeviceArray(host.size()) {
    cuda::copy_to_device(p_, host.data(), bytes());
  }
  ~DeviceArray() { cuda::device_free(p_); }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
  T* get() const { return p_; }
  std::vector<T> to_host() const {
    std::vector<T> h(n_);
    cuda::copy_to_host(h.data(), p_, bytes());
    return h;
  }

 private:
  size_t bytes() const { return std::max<size_t>(n_, 1) * sizeof(T); }
  size_t n_;
  T* p_;
};

std::vector<float> random_floats(size_t n, uint64_t seed) {
  std::vector<float> v(n);
  uint64_t s = seed;
  const uint32_t specials[] = {0x7f800000u, 0xff800000u, 0x7fc00000u, 0x7f800001u,
                               0x00000001u, 0x80000000u, 0x7f7fffffu, 0x3f808000u};
  for (size_t i = 0; i < n; ++i) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    v[i] = bits_as_float(i % 89 == 0 ? specials[(i / 89) % 8] : uint32_t(s >> 32));
  }
  return v;
}

// Kernels run on a stream of their own; results are read after it is synchronised.
class CastGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string reason;
    if (!cuda::device_available(&reason)) GTEST_SKIP() << reason;
    stream_ = cuda::stream_create();
  }
  void TearDown() override {
    if (stream_) cuda::stream_destroy(stream_);
  }
  template <typename T>
  std::vector<T> result(const DeviceArray<T>& out) {
    cuda::stream_synchronize(stream_);
    return out.to_host();
  }
  cuda::Stream stream_ = nullptr;
};

const size_t kLengths[] = {1, 7, 64, 2049, (size_t(1) << 22) + 13};

TEST_F(CastGpu, RoundNearestMatchesCpu) {
  for (size_t n : kLengths) {
    const std::vector<float> x = random_floats(n, n);
    DeviceArray<float> dx(x);
    DeviceArray<bf16> dy(n);
    cuda::cast_f32_to_bf16_rn(dx.get(), dy.get(), n, stream_);
    const std::vector<bf16> gpu = result(dy);
    std::vector<bf16> cpu(n);
    cpu::cast_f32_to_bf16_rn(x.data(), cpu.data(), n);
    for (size_t i = 0; i < n; ++i) ASSERT_EQ(gpu[i].bits, cpu[i].bits) << "n " << n << " i " << i;
  }
}

TEST_F(CastGpu, WidenMatchesCpu) {
  const size_t n = (size_t(1) << 16) + 5;  // every bf16 pattern and then some
  std::vector<bf16> x(n);
  for (size_t i = 0; i < n; ++i) x[i] = bf16{uint16_t(i)};
  DeviceArray<bf16> dx(x);
  DeviceArray<float> dy(n);
  cuda::cast_bf16_to_f32(dx.get(), dy.get(), n, stream_);
  const std::vector<float> gpu = result(dy);
  std::vector<float> cpu(n);
  cpu::cast_bf16_to_f32(x.data(), cpu.data(), n);
  for (size_t i = 0; i < n; ++i) ASSERT_EQ(float_as_bits(gpu[i]), float_as_bits(cpu[i])) << i;
}

TEST_F(CastGpu, StochasticMatchesCpu) {
  const uint64_t bases[] = {0, 5, 8, 1000003, (uint64_t(1) << 35) - 3};
  for (size_t n : kLengths) {
    for (uint64_t base : bases) {
      const std::vector<float> x = random_floats(n, n + base);
      DeviceArray<float> dx(x);
      DeviceArray<bf16> dy(n);
      cuda::cast_f32_to_bf16_sr(dx.get(), dy.get(), n, 0xfeedull, kPurpose, 42, base, stream_);
      const std::vector<bf16> gpu = result(dy);
      std::vector<bf16> cpu(n);
      cpu::cast_f32_to_bf16_sr(x.data(), cpu.data(), n, 0xfeedull, kPurpose, 42, base);
      for (size_t i = 0; i < n; ++i) {
        ASSERT_EQ(gpu[i].bits, cpu[i].bits) << "n " << n << " base " << base << " i " << i;
      }
    }
  }
}

// Arrays that start off a 16-byte boundary take the element-by-element path
// and store the same bits as the aligned chunks.
TEST_F(CastGpu, MisalignedArraysMatchCpu) {
  const size_t n = 4099;
  const std::vector<float> x = random_floats(n + 1, 11);
  DeviceArray<float> dx(x);
  DeviceArray<bf16> dy(n + 1);
  std::vector<bf16> cpu(n);
  cuda::cast_f32_to_bf16_rn(dx.get() + 1, dy.get() + 1, n, stream_);
  std::vector<bf16> gpu = result(dy);
  cpu::cast_f32_to_bf16_rn(x.data() + 1, cpu.data(), n);
  for (size_t i = 0; i < n; ++i) ASSERT_EQ(gpu[i + 1].bits, cpu[i].bits) << "rn i " << i;
  cuda::cast_f32_to_bf16_sr(dx.get() + 1, dy.get() + 1, n, 7, kPurpose, 3, 16, stream_);
  gpu = result(dy);
  cpu::cast_f32_to_bf16_sr(x.data() + 1, cpu.data(), n, 7, kPurpose, 3, 16);
  for (size_t i = 0; i < n; ++i) ASSERT_EQ(gpu[i + 1].bits, cpu[i].bits) << "sr i " << i;
  DeviceArray<float> dw(n + 1);
  cuda::cast_bf16_to_f32(dy.get() + 1, dw.get() + 1, n, stream_);
  const std::vector<float> wide = result(dw);
  for (size_t i = 0; i < n; ++i) {
    ASSERT_EQ(float_as_bits(wide[i + 1]), float_as_bits(bf16_to_float(cpu[i]))) << "widen i " << i;
  }
}

// A shard cast on the GPU with its global offset equals the CPU cast of the
// whole array (what ZeRO sharding relies on).
TEST_F(CastGpu, StochasticShardMatchesWholeCpu) {
  const size_t n = 100003, cut = 33333;
  const std::vector<float> x = random_floats(n, 3);
  std::vector<bf16> whole(n);
  cpu::cast_f32_to_bf16_sr(x.data(), whole.data(), n, 9, kPurpose, 1, 0);
  const std::vector<float> shard(x.begin() + cut, x.end());
  DeviceArray<float> dx(shard);
  DeviceArray<bf16> dy(shard.size());
  cuda::cast_f32_to_bf16_sr(dx.get(), dy.get(), shard.size(), 9, kPurpose, 1, cut, stream_);
  const std::vector<bf16> gpu = result(dy);
  for (size_t i = 0; i < shard.size(); ++i) ASSERT_EQ(gpu[i].bits, whole[cut + i].bits) << i;
}

}  // namespace
}  // namespace srkit

// Device memory for the conformance suite: an RAII array on a Backend (allocate
// / release, copy_to_device / copy_to_host), and tensors of fp32 values stored
// in either dtype. Every test talks to the backend under test only through
// these, so the same test body runs on any device.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <utility>
#include <vector>

#include "kernels/common/bf16.h"
#include "kernels/common/dtype.h"
#include "lib/backend/backend.h"

namespace srkit::conformance {

// The byte every poisoned output starts with: 0xFFFFFFFF and 0xFFFF are NaN in
// fp32 and bf16, so an element an op forgets to write shows up as NaN.
constexpr uint8_t kPoisonByte = 0xFF;

// `bytes` bytes of device memory of one backend, released on destruction.
class DeviceArray {
 public:
  DeviceArray() = default;
  DeviceArray(Backend& backend, size_t bytes)
      : backend_(&backend), bytes_(bytes), ptr_(backend.allocate(bytes, MemCategory::kScratch)) {}
  ~DeviceArray() { reset(); }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
  DeviceArray(DeviceArray&& o) noexcept { *this = std::move(o); }
  DeviceArray& operator=(DeviceArray&& o) noexcept {
    if (this != &o) {
      reset();
      backend_ = std::exchange(o.backend_, nullptr);
      bytes_ = std::exchange(o.bytes_, 0);
      ptr_ = std::exchange(o.ptr_, nullptr);
    }
    return *this;
  }

  void* get() const { return ptr_; }
  template <typename T>
  T* as() const {
    return static_cast<T*>(ptr_);
  }
  // Pointer `offset` bytes into the array.
  void* at(size_t offset) const { return static_cast<char*>(ptr_) + offset; }
  size_t bytes() const { return bytes_; }
  Backend& backend() const { return *backend_; }

  void write(const void* host, size_t bytes, size_t offset = 0) {
    backend_->copy_to_device(at(offset), host, bytes);
  }
  void read(void* host, size_t bytes, size_t offset = 0) const {
    backend_->copy_to_host(host, at(offset), bytes);
  }
  std::vector<uint8_t> host_bytes() const {
    std::vector<uint8_t> out(bytes_);
    read(out.data(), bytes_);
    return out;
  }
  void fill_bytes(uint8_t byte) {
    const std::vector<uint8_t> b(bytes_, byte);
    write(b.data(), bytes_);
  }
  void poison() { fill_bytes(kPoisonByte); }

 private:
  void reset() {
    if (backend_ && ptr_) backend_->release(ptr_);
    backend_ = nullptr;
    ptr_ = nullptr;
    bytes_ = 0;
  }
  Backend* backend_ = nullptr;
  size_t bytes_ = 0;
  void* ptr_ = nullptr;
};

// A device array holding a copy of host elements of a trivially copyable type
// (int32 tokens, fp32 statistics, doubles, structs).
template <typename T>
DeviceArray upload(Backend& backend, const std::vector<T>& host) {
  DeviceArray a(backend, host.size() * sizeof(T));
  if (!host.empty()) a.write(host.data(), host.size() * sizeof(T));
  return a;
}
template <typename T>
std::vector<T> download(const DeviceArray& a) {
  std::vector<T> out(a.bytes() / sizeof(T));
  if (!out.empty()) a.read(out.data(), out.size() * sizeof(T));
  return out;
}
// An array of n elements of T, every byte kPoisonByte.
template <typename T>
DeviceArray poisoned(Backend& backend, size_t n) {
  DeviceArray a(backend, n * sizeof(T));
  a.poison();
  return a;
}

// n elements stored in dt, seen by the tests as fp32 values (bf16 widened
// exactly; values written to a bf16 tensor are rounded to nearest even).
class Tensor {
 public:
  Tensor() = default;
  Tensor(Backend& backend, DType dt, size_t n)
      : dt_(dt), n_(n), array_(backend, n * dtype_size(dt)) {}
  static Tensor of(Backend& backend, DType dt, const std::vector<float>& values) {
    Tensor t(backend, dt, values.size());
    t.set(values);
    return t;
  }
  static Tensor poisoned(Backend& backend, DType dt, size_t n) {
    Tensor t(backend, dt, n);
    t.poison();
    return t;
  }

  DType dtype() const { return dt_; }
  size_t size() const { return n_; }
  void* get() const { return array_.get(); }
  // Element i's address (an offset view for ops on part of a tensor).
  void* at(size_t i) const { return array_.at(i * dtype_size(dt_)); }
  Backend& backend() const { return array_.backend(); }
  DeviceArray& array() { return array_; }

  void set(const std::vector<float>& values) {
    EXPECT_EQ(values.size(), n_);
    if (dt_ == DType::kF32) {
      array_.write(values.data(), n_ * sizeof(float));
    } else {
      std::vector<bf16> h(n_);
      for (size_t i = 0; i < n_; ++i) h[i] = float_to_bf16_rn(values[i]);
      array_.write(h.data(), n_ * sizeof(bf16));
    }
  }
  std::vector<float> values() const {
    std::vector<float> out(n_);
    if (dt_ == DType::kF32) {
      array_.read(out.data(), n_ * sizeof(float));
    } else {
      std::vector<bf16> h(n_);
      array_.read(h.data(), n_ * sizeof(bf16));
      for (size_t i = 0; i < n_; ++i) out[i] = bf16_to_float(h[i]);
    }
    return out;
  }
  // The stored bytes, for bit-for-bit comparisons.
  std::vector<uint8_t> bits() const { return array_.host_bytes(); }
  void poison() { array_.poison(); }

 private:
  DType dt_ = DType::kF32;
  size_t n_ = 0;
  DeviceArray array_;
};

}  // namespace srkit::conformance

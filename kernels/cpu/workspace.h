// Reusable fp32 scratch for CPU kernels (e.g. bf16 operands widened for sgemm).
// Grows on demand and is kept, so the training loop allocates nothing after the
// first step; the backend reports its size as "scratch" memory.
#pragma once

#include <cstddef>
#include <memory>

namespace srkit::cpu {

class Workspace {
 public:
  static constexpr int kSlots = 8;
  static constexpr size_t kAlignment = 64;  // one cache line, a whole AVX-512 vector

  // A 64-byte aligned buffer of at least n floats in slot `slot` (0..kSlots-1);
  // valid until the next call for the same slot with a larger n. Contents are
  // unspecified (not zeroed); growing discards them.
  float* floats(int slot, size_t n);
  size_t bytes() const;       // currently held
  size_t peak_bytes() const;  // high-water mark
  void release();             // frees every slot (peak is kept)

 private:
  struct AlignedFree {
    void operator()(float* p) const;
  };
  struct Buffer {
    std::unique_ptr<float[], AlignedFree> data;
    size_t size = 0;
  };
  Buffer slots_[kSlots];
  size_t peak_ = 0;
};

}  // namespace srkit::cpu

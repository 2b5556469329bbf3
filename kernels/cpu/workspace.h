// Reusable fp32 scratch for CPU kernels (e.g. bf16 operands widened for sgemm).
// Grows on demand and is kept, so the training loop allocates nothing after the
// first step; the backend reports its size as "scratch" memory.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

namespace srkit::cpu {

class Workspace {
 public:
  // A buffer of at least n floats in slot `slot` (0..7); valid until the next
  // call for the same slot with a larger n.
  float* floats(int slot, size_t n);
  size_t bytes() const;       // currently held
  size_t peak_bytes() const;  // high-water mark

 private:
  struct Buffer {
    std::unique_ptr<float[]> data;
    size_t size = 0;
  };
  Buffer slots_[8];
  size_t peak_ = 0;
};

}  // namespace srkit::cpu

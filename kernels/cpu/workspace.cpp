#include "kernels/cpu/workspace.h"

#include <new>
#include <stdexcept>
#include <string>

namespace srkit::cpu {

void Workspace::AlignedFree::operator()(float* p) const {
  ::operator delete[](p, std::align_val_t(kAlignment));
}

float* Workspace::floats(int slot, size_t n) {
  if (slot < 0 || slot >= kSlots) {
    throw std::invalid_argument("Workspace::floats: slot " + std::to_string(slot) +
                                " outside [0, " + std::to_string(kSlots) + ")");
  }
  Buffer& b = slots_[slot];
  if (b.size < n) {
    b.data.reset();  // free first so the old and new buffers never coexist
    b.size = 0;
    b.data.reset(
        static_cast<float*>(::operator new[](n * sizeof(float), std::align_val_t(kAlignment))));
    b.size = n;
    if (bytes() > peak_) peak_ = bytes();
  }
  return b.data.get();
}

size_t Workspace::bytes() const {
  size_t total = 0;
  for (const Buffer& b : slots_) total += b.size * sizeof(float);
  return total;
}

size_t Workspace::peak_bytes() const { return peak_; }

void Workspace::release() {
  for (Buffer& b : slots_) {
    b.data.reset();
    b.size = 0;
  }
}

}  // namespace srkit::cpu

#include "kernels/cpu/host_alloc.h"

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>

namespace srkit::cpu {
namespace {

constexpr size_t kLine = 64, kPage = 4096;
constexpr size_t kColours = kPage / kLine;  // one per L1 set of a 4 KiB-indexed cache
// Colour k is k * 39 mod 64: 39 / 64 is near the golden ratio, so blocks
// allocated one after another (weights, then gradients; m, then v) land
// far apart in the page, and 39 being odd visits all 64 colours.
constexpr size_t kColourStep = 39;
std::atomic<size_t> next_block{0};

}  // namespace

void* host_alloc(size_t bytes) {
  if (bytes > SIZE_MAX - 2 * kPage) return nullptr;
  const size_t rounded = (bytes + kLine - 1) / kLine * kLine;
  const bool coloured = rounded >= kColouredMinBytes;
  // The block starts `offset` bytes into the allocation; the allocation's own
  // address is kept in the 8 bytes just before it, for host_free.
  size_t offset = kLine, align = kLine;
  if (coloured) {
    const size_t k = next_block.fetch_add(1, std::memory_order_relaxed);
    offset = kLine * (1 + k * kColourStep % kColours);  // 64 .. 4096
    align = kPage;
  }
  const size_t total = (offset + rounded + align - 1) / align * align;  // aligned_alloc wants it
  char* raw = static_cast<char*>(std::aligned_alloc(align, total));
  if (raw == nullptr) return nullptr;
  char* block = raw + offset;
  std::memcpy(block - sizeof raw, &raw, sizeof raw);
  std::memset(block, 0, rounded);
  return block;
}

void host_free(void* p) {
  if (p == nullptr) return;
  char* raw;
  std::memcpy(&raw, static_cast<char*>(p) - sizeof raw, sizeof raw);
  std::free(raw);
}

}  // namespace srkit::cpu

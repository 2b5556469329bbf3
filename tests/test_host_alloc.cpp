// Host blocks for streamed arrays (kernels/cpu/host_alloc.h): zeroed, 64-byte
// aligned, and large ones spread over the page so that arrays allocated one
// after another never share L1 sets at the same element index.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <set>
#include <vector>

#include "kernels/cpu/host_alloc.h"
#include "lib/backend/backend.h"

namespace srkit {
namespace {

constexpr size_t kPage = 4096, kLine = 64;

size_t page_offset(const void* p) { return reinterpret_cast<uintptr_t>(p) % kPage; }

// Circular distance between two offsets within the page.
size_t page_distance(size_t a, size_t b) {
  const size_t d = a > b ? a - b : b - a;
  return std::min(d, kPage - d);
}

TEST(HostAlloc, BlocksAreZeroedAlignedAndWholeWritable) {
  for (size_t bytes : {size_t(0), size_t(1), size_t(63), size_t(64), size_t(65),
                       cpu::kColouredMinBytes - 1, cpu::kColouredMinBytes, (size_t(1) << 20) + 3}) {
    void* p = cpu::host_alloc(bytes);
    ASSERT_NE(p, nullptr) << bytes;
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % kLine, 0u) << bytes;
    const auto* c = static_cast<const unsigned char*>(p);
    EXPECT_TRUE(std::all_of(c, c + bytes, [](unsigned char x) { return x == 0; })) << bytes;
    std::memset(p, 0xa5, bytes);  // every byte is the caller's (ASan checks the bounds)
    cpu::host_free(p);
  }
  cpu::host_free(nullptr);
}

TEST(HostAlloc, ImpossibleSizesFailWithoutAllocating) {
  EXPECT_EQ(cpu::host_alloc(SIZE_MAX), nullptr);
  EXPECT_EQ(cpu::host_alloc(SIZE_MAX - 100), nullptr);
}

// 64 large blocks in a row take all 64 line offsets of the page, and any six in
// a row (the most arrays an AdamW step streams) start at least three lines apart.
TEST(HostAlloc, ConsecutiveLargeBlocksSpreadOverThePage) {
  constexpr int kBlocks = 64;
  std::vector<void*> blocks;
  for (int i = 0; i < kBlocks; ++i) blocks.push_back(cpu::host_alloc(cpu::kColouredMinBytes));
  std::set<size_t> offsets;
  for (void* p : blocks) offsets.insert(page_offset(p));
  EXPECT_EQ(offsets.size(), size_t(kBlocks));
  for (int i = 0; i < kBlocks; ++i) {
    for (int j = i + 1; j < std::min(kBlocks, i + 6); ++j) {
      EXPECT_GE(page_distance(page_offset(blocks[size_t(i)]), page_offset(blocks[size_t(j)])),
                3 * kLine)
          << "blocks " << i << " and " << j;
    }
  }
  for (void* p : blocks) cpu::host_free(p);
}

// The CPU backend's tensors are such blocks: weights, gradients, m and v of a
// model, allocated in a row, start at different offsets within their pages.
TEST(HostAlloc, CpuBackendTensorsTakeDistinctPageOffsets) {
  const std::unique_ptr<Backend> backend = make_cpu_backend(1);
  std::vector<void*> tensors;
  std::set<size_t> offsets;
  for (int i = 0; i < 4; ++i) {
    tensors.push_back(backend->allocate(size_t(1) << 20, MemCategory::kWeights));
    offsets.insert(page_offset(tensors.back()));
  }
  EXPECT_EQ(offsets.size(), tensors.size());
  for (void* p : tensors) backend->release(p);
}

}  // namespace
}  // namespace srkit

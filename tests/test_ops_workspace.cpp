// Workspace: aligned, grow-only slots with byte accounting.
#include <gtest/gtest.h>

#include <cstdint>
#include <stdexcept>

#include "kernels/cpu/workspace.h"

namespace srkit::cpu {
namespace {

TEST(Workspace, SlotsAreAlignedAndGrowOnly) {
  Workspace ws;
  EXPECT_EQ(ws.bytes(), 0u);
  float* a = ws.floats(0, 100);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a) % Workspace::kAlignment, 0u);
  a[99] = 1.0f;
  EXPECT_EQ(ws.floats(0, 50), a);  // smaller request: same buffer, no reallocation
  EXPECT_EQ(ws.bytes(), 100 * sizeof(float));
  float* b = ws.floats(7, 10);
  EXPECT_NE(a, b);
  EXPECT_EQ(ws.bytes(), 110 * sizeof(float));
  float* a2 = ws.floats(0, 1000);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a2) % Workspace::kAlignment, 0u);
  a2[999] = 2.0f;
  EXPECT_EQ(ws.bytes(), 1010 * sizeof(float));
  EXPECT_EQ(ws.peak_bytes(), 1010 * sizeof(float));
  ws.release();
  EXPECT_EQ(ws.bytes(), 0u);
  EXPECT_EQ(ws.peak_bytes(), 1010 * sizeof(float));
}

TEST(Workspace, RejectsSlotOutOfRange) {
  Workspace ws;
  EXPECT_THROW(ws.floats(-1, 1), std::invalid_argument);
  EXPECT_THROW(ws.floats(Workspace::kSlots, 1), std::invalid_argument);
}

}  // namespace
}  // namespace srkit::cpu

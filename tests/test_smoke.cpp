#include <gtest/gtest.h>

#include "kernels/common/bf16.h"

TEST(Smoke, Bf16OneRoundTrips) { EXPECT_EQ(srkit::float_to_bf16_rn(1.0f).bits, 0x3f80); }

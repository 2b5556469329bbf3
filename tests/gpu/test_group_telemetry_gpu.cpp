// Optimizer telemetry per tensor group on the CUDA backend against the CPU's:
// Optimizer::step with telemetry steps each group range in its own pass, and
// on both devices every slot's counts agree exactly and its fp64 sums closely,
// the stored bits agree, and they equal the single pass's. Runs on a GPU and
// in the CPU emulation of CUDA; skips with the runtime's reason where neither
// exists.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "lib/backend/backend.h"
#include "lib/model/gpt.h"
#include "lib/model/param_layout.h"
#include "lib/precision.h"
#include "lib/train/optimizer.h"
#include "tests/adamw_element_reference.h"

namespace srkit {
namespace {

using srkit::testing::expect_telemetry_eq;

class GroupTelemetryCuda : public ::testing::Test {
 protected:
  void SetUp() override {
    try {
      make_backend("cuda", 0);
    } catch (const std::exception& e) {
      GTEST_SKIP() << e.what();
    }
  }
};

// A model and its optimizer over [begin, end) on one device, with the
// telemetry slots in that device's memory.
struct Rig {
  std::unique_ptr<Backend> backend;
  std::unique_ptr<GPT> model;
  std::unique_ptr<Optimizer> optimizer;
  AdamWTelemetry* slots = nullptr;  // device

  Rig(const std::string& device, const PrecisionStrategy& s, size_t begin, size_t end)
      : backend(make_backend(device, 0)) {
    model = std::make_unique<GPT>(*backend, gpt_preset("tiny"), s.weights());
    model->init_weights(3);
    optimizer = std::make_unique<Optimizer>(*model, s, 11, begin, end);
    slots = static_cast<AdamWTelemetry*>(backend->allocate(
        optimizer->telemetry_slots() * sizeof(AdamWTelemetry), MemCategory::kScratch));
  }
  ~Rig() { backend->release(slots); }

  void set_grads(const std::vector<uint8_t>& bytes) {
    backend->copy_to_device(model->grads(), bytes.data(), bytes.size());
  }
  std::vector<AdamWTelemetry> step(uint64_t step, bool telemetry) {
    optimizer->step(step, 1e-3f, AdamWSettings{}, nullptr, telemetry ? slots : nullptr);
    std::vector<AdamWTelemetry> out(optimizer->telemetry_slots());
    if (telemetry) backend->copy_to_host(out.data(), slots, out.size() * sizeof(AdamWTelemetry));
    return out;
  }
  std::vector<uint8_t> weights() {
    std::vector<uint8_t> w(model->weight_bytes());
    backend->copy_to_host(w.data(), model->weights(), w.size());
    return w;
  }
};

std::vector<uint8_t> random_grads(DType dt, size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1e-2f);
  std::vector<uint8_t> out(n * dtype_size(dt));
  for (size_t i = 0; i < n; ++i) {
    const float x = normal(rng);
    if (dt == DType::kF32) {
      std::memcpy(out.data() + 4 * i, &x, 4);
    } else {
      const bf16 h = float_to_bf16_rn(x);
      std::memcpy(out.data() + 2 * i, &h, 2);
    }
  }
  return out;
}

TEST_F(GroupTelemetryCuda, SlotsAndBitsMatchTheCpu) {
  const ParamLayout layout(gpt_preset("tiny"));
  const std::vector<ParamGroupRange> ranges = layout.group_ranges();
  // The whole buffer, and a ZeRO-like shard that starts and ends inside ranges.
  const std::vector<std::pair<size_t, size_t>> parts = {
      {0, layout.total_size()},
      {ranges[4].begin + kParamAlign, ranges[10].begin + 2 * kParamAlign}};
  for (const char* spec : {"bf16", "bf16-sr", "mixed", "bf16-kahan", "bf16-rem16", "fp32"}) {
    const PrecisionStrategy s = strategy_from_string(spec);
    for (const auto& [begin, end] : parts) {
      Rig cpu("cpu", s, begin, end), cuda("cuda", s, begin, end), one_pass("cuda", s, begin, end);
      for (uint64_t step = 1; step <= 2; ++step) {
        const std::vector<uint8_t> g = random_grads(s.weights(), layout.total_size(), 50 + step);
        for (Rig* r : {&cpu, &cuda, &one_pass}) r->set_grads(g);
        const std::vector<AdamWTelemetry> want = cpu.step(step, true), got = cuda.step(step, true);
        one_pass.step(step, false);
        for (size_t k = 0; k < want.size(); ++k) {
          const std::string what = std::string(spec) + " [" + std::to_string(begin) + ", " +
                                   std::to_string(end) + ") step " + std::to_string(step) +
                                   " slot " + std::to_string(k);
          expect_telemetry_eq(got[k], want[k], 1e-6, what.c_str());
        }
      }
      EXPECT_TRUE(cuda.weights() == cpu.weights()) << spec << ": the devices store the same bits";
      EXPECT_TRUE(cuda.weights() == one_pass.weights()) << spec << ": split passes = one pass";
    }
  }
}

}  // namespace
}  // namespace srkit

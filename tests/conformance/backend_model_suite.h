// The whole-model part of the conformance suite: a tiny GPT (L = 2, C = 20,
// NH = 2, V = 50 padded to 128, T = 13, B = 2) through GPT and Optimizer on the
// backend under test, for fp32 and bf16 strategies.
//   - On every backend (promises of the design, not of the CPU): the fused
//     micro-batch (forward_backward) equals forward + backward bit for bit;
//     kOverwrite equals zero_grads + kAccumulate (as values: a zero's sign may
//     differ); two identical runs give identical bits.
//   - On a device other than the CPU: losses, gradients, the gradient norm and
//     the weights after three optimizer steps close to the CPU's
//     (tolerances.h).
// tests/test_gpt_model.cpp holds the CPU's whole-model finite differences.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/common/bf16.h"
#include "kernels/common/step_record.h"
#include "lib/backend/backend.h"
#include "lib/model/gpt.h"
#include "lib/precision.h"
#include "lib/train/optimizer.h"
#include "tests/conformance/compare.h"
#include "tests/conformance/device_array.h"
#include "tests/conformance/fixture.h"
#include "tests/conformance/tolerances.h"

namespace srkit::conformance {
namespace model_suite {

constexpr int kB = 2, kT = 13, kAccum = 2;

inline GPTConfig tiny_config() {
  GPTConfig c;
  c.name = "conformance";
  c.num_layers = 2;
  c.channels = 20;
  c.num_heads = 2;
  c.vocab_size = 50;  // padded to 128
  c.max_seq_len = 16;
  return c;
}

// Micro-batch k of optimizer step s; one target is ignored.
struct Batch {
  std::vector<int32_t> inputs, targets;
};
inline Batch batch(int step, int k) {
  const int V = tiny_config().vocab_size;
  Batch b{std::vector<int32_t>(kB * kT), std::vector<int32_t>(kB * kT)};
  for (int i = 0; i < kB * kT; ++i) {
    b.inputs[i] = (i * 7 + 3 + 11 * step + 5 * k) % V;
    b.targets[i] = (i * 11 + 5 + 3 * step + 7 * k) % V;
  }
  b.targets[3] = -1;
  return b;
}

inline std::vector<uint8_t> grad_bits(GPT& m) {
  std::vector<uint8_t> out(m.grad_bytes());
  m.backend().copy_to_host(out.data(), m.grads(), out.size());
  return out;
}
inline std::vector<float> as_values(const std::vector<uint8_t>& bytes, DType dt) {
  std::vector<float> out(bytes.size() / dtype_size(dt));
  for (size_t i = 0; i < out.size(); ++i) {
    if (dt == DType::kF32) {
      std::memcpy(&out[i], &bytes[4 * i], 4);
    } else {
      bf16 h;
      std::memcpy(&h, &bytes[2 * i], 2);
      out[i] = bf16_to_float(h);
    }
  }
  return out;
}
// Poisons every gradient tensor (the alignment padding between tensors belongs
// to none, keeps its zeros, and no op writes it).
inline void poison_grads(GPT& m) {
  const size_t es = dtype_size(m.grad_dtype());
  for (const ParamTensor& t : m.layout().tensors()) {
    const std::vector<uint8_t> ff(t.count * es, kPoisonByte);
    m.backend().copy_to_device(static_cast<char*>(m.grads()) + t.offset * es, ff.data(), ff.size());
  }
}

// The strategy's model: its weights, compute and gradient dtypes.
inline GPT model_of(Backend& b, const PrecisionStrategy& st) {
  return GPT(b, tiny_config(), st.weights(), st.compute, st.grads());
}

TEST_P(BackendModel, FusedMicroBatchEqualsForwardThenBackward) {
  const DType dt = strategy().grads();
  GPT fused = model_of(be(), strategy()), plain = model_of(be(), strategy());
  fused.init_weights(5);
  plain.init_weights(5);
  // kOverwrite must ignore what the gradients held.
  poison_grads(fused);
  poison_grads(plain);
  DeviceArray losses = poisoned<double>(be(), 4);
  double* loss = losses.as<double>();
  for (int k = 0; k < 2; ++k) {
    SCOPED_TRACE("micro-batch " + std::to_string(k));
    const GradWrite mode = k == 0 ? GradWrite::kOverwrite : GradWrite::kAccumulate;
    const Batch b = batch(1, k);
    fused.forward_backward(b.inputs.data(), b.targets.data(), kB, kT, 1.0f / kAccum, mode,
                           loss + 2 * k);
    plain.forward(b.inputs.data(), b.targets.data(), kB, kT, loss + 2 * k + 1);
    plain.backward(1.0f / kAccum, mode);
    const auto g = grad_bits(fused);
    EXPECT_TRUE(no_nan(as_values(g, dt))) << "gradients";
    EXPECT_TRUE(same_bits(g, grad_bits(plain), dtype_size(dt))) << "gradients";
  }
  const auto l = download<double>(losses);
  EXPECT_EQ(l[0], l[1]) << "loss of micro-batch 0";
  EXPECT_EQ(l[2], l[3]) << "loss of micro-batch 1";
  // A freshly initialised model predicts about uniformly: loss ~ log V.
  EXPECT_NEAR(l[0], std::log(double(tiny_config().vocab_size)), 0.5);
}

TEST_P(BackendModel, OverwriteEqualsZeroGradsThenAccumulate) {
  const DType dt = strategy().grads();
  GPT over = model_of(be(), strategy()), acc = model_of(be(), strategy());
  over.init_weights(5);
  acc.init_weights(5);
  poison_grads(over);
  acc.zero_grads();
  for (int k = 0; k < 2; ++k) {
    SCOPED_TRACE("micro-batch " + std::to_string(k));
    const Batch b = batch(1, k);
    over.forward_backward(b.inputs.data(), b.targets.data(), kB, kT, 1.0f / kAccum,
                          k == 0 ? GradWrite::kOverwrite : GradWrite::kAccumulate, nullptr);
    acc.forward_backward(b.inputs.data(), b.targets.data(), kB, kT, 1.0f / kAccum,
                         GradWrite::kAccumulate, nullptr);
    EXPECT_TRUE(same_values(as_values(grad_bits(over), dt), as_values(grad_bits(acc), dt)));
  }
}

// What three optimizer steps of two micro-batches each leave behind.
struct TrainTrace {
  std::vector<std::vector<double>> records;   // per step: the step record
  std::vector<GradClip> clips;                // per step
  std::vector<float> grads;                   // step 1's accumulated gradients
  std::vector<std::vector<uint8_t>> weights;  // per step, after the update
};

// Step 1 clips (max_norm well below the norm), step 2 runs without a clip,
// step 3 with clipping off (max_norm 0). The step record is filled by hand as
// the trainer fills it: signal 0, the gradients' sum of squares, the losses.
inline TrainTrace train_three_steps(Backend& b, const PrecisionStrategy& st) {
  const DType gt = st.grads();
  GPT model = model_of(b, st);
  model.init_weights(5);
  Optimizer opt(model, st, /*seed=*/17);
  AdamWSettings settings;
  const size_t stride = StepRecord::doubles(kAccum);
  DeviceArray record(b, stride * sizeof(double));
  DeviceArray clip(b, sizeof(GradClip));
  double* rec = record.as<double>();
  const float max_norm[3] = {0.05f, 1.0f, 0.0f};
  TrainTrace tr;
  for (int s = 1; s <= 3; ++s) {
    record.poison();
    const double signal = 0.0;
    record.write(&signal, sizeof signal, StepRecord::kSignal * sizeof(double));
    for (int k = 0; k < kAccum; ++k) {
      const Batch bt = batch(s, k);
      model.forward_backward(bt.inputs.data(), bt.targets.data(), kB, kT, 1.0f / kAccum,
                             k == 0 ? GradWrite::kOverwrite : GradWrite::kAccumulate,
                             rec + StepRecord::kLoss0 + k);
    }
    b.sum_squares(gt, model.grads(), model.layout().total_size(), rec + StepRecord::kSumSq);
    b.grad_clip(rec, 1, kAccum, max_norm[s - 1], clip.as<GradClip>());
    if (s == 1) tr.grads = as_values(grad_bits(model), gt);
    opt.step(uint64_t(s), kModelLr, settings, s == 2 ? nullptr : clip.as<GradClip>(), nullptr);
    tr.records.push_back(download<double>(record));
    tr.clips.push_back(download<GradClip>(clip)[0]);
    std::vector<uint8_t> w(model.weight_bytes());
    b.copy_to_host(w.data(), model.weights(), w.size());
    tr.weights.push_back(std::move(w));
  }
  return tr;
}

inline std::vector<uint8_t> bytes_of(const GradClip& c) {
  std::vector<uint8_t> out(sizeof c);
  std::memcpy(out.data(), &c, sizeof c);
  return out;
}

// Every weight within the loose bound, and most within the tight one (tolerances.h).
inline ::testing::AssertionResult weights_close(const std::vector<float>& got,
                                                const std::vector<float>& want, bool bf16_weights) {
  size_t tight = 0;
  for (size_t j = 0; j < got.size(); ++j) {
    const double ulp = bf16_weights ? double(bf16_ulp(want[j])) : 0.0;
    const double err = std::fabs(double(got[j]) - double(want[j]));
    if (!(err <= kModelWeightsLooseLr * kModelLr + 2 * ulp)) {
      return ::testing::AssertionFailure()
             << "weight " << j << ": " << got[j] << " vs the CPU's " << want[j];
    }
    if (err <= kModelWeightsTightLr * kModelLr + ulp) ++tight;
  }
  const double share = double(tight) / double(got.size());
  if (share < kModelWeightsTightShare) {
    return ::testing::AssertionFailure() << "only " << share << " of the weights are close";
  }
  return ::testing::AssertionSuccess();
}

TEST_P(BackendModel, ThreeTrainingSteps) {
  const PrecisionStrategy st = strategy();
  const DType dt = st.weights();
  const TrainTrace got = train_three_steps(be(), st);
  // The scenario does what it says: step 1 clips, step 3 does not, all finite.
  EXPECT_LT(got.clips[0].scale, 1.0f);
  EXPECT_EQ(got.clips[2].scale, 1.0f);
  for (const GradClip& c : got.clips) EXPECT_EQ(c.ok, 1);
  for (size_t s = 1; s < 3; ++s) {
    EXPECT_FALSE(same_bits(got.weights[s], got.weights[s - 1])) << "step " << s + 1 << " moved";
  }
  // Two identical runs give identical bits.
  const TrainTrace again = train_three_steps(be(), st);
  for (size_t s = 0; s < 3; ++s) {
    SCOPED_TRACE("step " + std::to_string(s + 1));
    EXPECT_EQ(got.records[s], again.records[s]) << "step record";
    EXPECT_TRUE(same_bits(bytes_of(got.clips[s]), bytes_of(again.clips[s]))) << "clip";
    EXPECT_TRUE(same_bits(got.weights[s], again.weights[s], dtype_size(dt))) << "weights";
  }
  Backend* cpu = cpu_reference();
  if (cpu == nullptr) return;
  const TrainTrace want = train_three_steps(*cpu, st);
  const bool f32 = dt == DType::kF32;
  const double loss_rel = f32 ? kModelLossRelF32 : kModelLossRelBf16;
  const double grad_rel = f32 ? kModelGradRelF32 : kModelGradRelBf16;
  for (size_t s = 0; s < 3; ++s) {
    SCOPED_TRACE("step " + std::to_string(s + 1) + " against the CPU");
    for (int k = 0; k < kAccum; ++k) {
      const double l = want.records[s][StepRecord::kLoss0 + k];
      EXPECT_NEAR(got.records[s][StepRecord::kLoss0 + k], l, loss_rel * l) << "loss " << k;
    }
    EXPECT_NEAR(got.clips[s].norm, want.clips[s].norm, grad_rel * want.clips[s].norm)
        << "gradient norm";
    EXPECT_EQ(got.clips[s].ok, want.clips[s].ok);
  }
  const double gmax = max_abs(want.grads);
  EXPECT_TRUE(all_within(got.grads, want.grads, abs_rel(grad_rel * gmax, 0.0)))
      << "step 1's gradients";
  EXPECT_TRUE(weights_close(as_values(got.weights[2], dt), as_values(want.weights[2], dt), !f32))
      << "weights after three steps";
}

}  // namespace model_suite
}  // namespace srkit::conformance

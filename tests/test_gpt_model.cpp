// The GPT model on the CPU backend: whole-model finite-difference gradients,
// parameter layout, init determinism and thread-count invariance.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/common/bf16.h"
#include "lib/backend/backend.h"
#include "lib/model/gpt.h"
#include "lib/model/param_layout.h"

namespace srkit {
namespace {

GPTConfig small_config() {
  GPTConfig c;
  c.name = "fd";
  c.num_layers = 2;
  c.channels = 16;
  c.num_heads = 2;
  c.vocab_size = 50;  // padded to 128: padding must never matter
  c.max_seq_len = 8;
  return c;
}

void make_batch(int B, int T, int V, std::vector<int32_t>& in, std::vector<int32_t>& tg) {
  in.resize(size_t(B) * T);
  tg.resize(in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    in[i] = int32_t((i * 7 + 3) % V);
    tg[i] = int32_t((i * 11 + 5) % V);
  }
}

TEST(ParamLayout, AlignedContiguousAndCountsMatchGpt2) {
  GPTConfig c = gpt_preset("gpt2-124m");
  ParamLayout layout(c);
  // GPT-2 124M with the vocabulary padded to 50304: 124,475,904 parameters (llm.c).
  EXPECT_EQ(layout.num_params(), 124475904u);
  size_t expect_offset = 0;
  for (const ParamTensor& t : layout.tensors()) {
    EXPECT_EQ(t.offset % kParamAlign, 0u) << t.name;
    EXPECT_EQ(t.offset, expect_offset) << t.name;
    expect_offset = t.offset + (t.count + kParamAlign - 1) / kParamAlign * kParamAlign;
  }
  EXPECT_EQ(layout.total_size(), expect_offset);
  const auto segs = layout.segments();
  ASSERT_EQ(segs.size(), layout.tensors().size());
  EXPECT_TRUE(segs[0].decay);                            // wte
  EXPECT_FALSE(layout.get("h.ln_1.weight").decay);       // LayerNorm gain
  EXPECT_FALSE(layout.get("h.attn.c_attn.bias").decay);  // bias
  EXPECT_TRUE(layout.get("h.mlp.c_proj.weight").decay);  // matrix
}

TEST(GptModel, WholeModelGradientMatchesFiniteDifferences) {
  auto backend = make_cpu_backend(0);
  const GPTConfig c = small_config();
  GPT model(*backend, c, DType::kF32);
  std::vector<float> w = model.init_weights(7);
  // Non-trivial LayerNorm parameters and biases, so their gradients are exercised.
  for (const ParamTensor& t : model.layout().tensors()) {
    if (t.name.find("bias") != std::string::npos || t.name.find("ln") != std::string::npos) {
      for (size_t i = 0; i < t.count; ++i) w[t.offset + i] += 0.1f * std::sin(float(i + t.offset));
    }
  }
  model.set_weights_from_f32(w);
  const int B = 2, T = 8;
  std::vector<int32_t> in, tg;
  make_batch(B, T, c.vocab_size, in, tg);
  tg[3] = -1;  // an ignored position
  model.zero_grads();
  model.forward(in.data(), tg.data(), B, T);
  model.backward(1.0f);
  std::vector<float> grads(model.layout().total_size());
  backend->copy_to_host(grads.data(), model.grads(), grads.size() * sizeof(float));

  // Central differences on a spread of elements of every tensor. fp32 forward,
  // step 1e-2: truncation and rounding errors both stay below ~1e-4 here.
  const float h = 1e-2f;
  int checked = 0;
  for (const ParamTensor& t : model.layout().tensors()) {
    const size_t used = t.name == "wte" ? size_t(c.vocab_size) * c.channels : t.count;
    for (int k = 0; k < 6; ++k) {
      const size_t i = t.offset + (size_t(k) * 7919u) % used;
      std::vector<float> wp = w, wm = w;
      wp[i] += h;
      wm[i] -= h;
      model.set_weights_from_f32(wp);
      const double lp = model.forward(in.data(), tg.data(), B, T);
      model.set_weights_from_f32(wm);
      const double lm = model.forward(in.data(), tg.data(), B, T);
      const double fd = (lp - lm) / (2.0 * h);
      EXPECT_NEAR(grads[i], fd, 2e-4 + 2e-2 * std::fabs(fd))
          << t.name << " element " << i - t.offset;
      ++checked;
    }
  }
  EXPECT_EQ(checked, 16 * 6);
  // Padding: no gradient ever reaches padded vocabulary rows.
  const ParamTensor& wte = model.layout().get("wte");
  for (size_t i = size_t(c.vocab_size) * c.channels; i < wte.count; ++i) {
    ASSERT_EQ(grads[wte.offset + i], 0.0f);
  }
}

TEST(GptModel, InitIsDeterministicAndFollowsGpt2) {
  auto backend = make_cpu_backend(0);
  GPTConfig c = small_config();
  GPT a(*backend, c, DType::kBF16), b(*backend, c, DType::kBF16);
  const std::vector<float> wa = a.init_weights(42), wb = b.init_weights(42);
  EXPECT_EQ(wa, wb);
  const std::vector<float> wc = b.init_weights(43);
  EXPECT_NE(wa, wc);
  const ParamLayout& L = a.layout();
  EXPECT_EQ(wa[L.get("h.ln_1.weight").offset], 1.0f);
  EXPECT_EQ(wa[L.get("h.ln_1.bias").offset], 0.0f);
  // Matrices ~ N(0, 0.02): check the sample std of the fc weights.
  const ParamTensor& fc = L.get("h.mlp.c_fc.weight");
  double s2 = 0;
  for (size_t i = 0; i < fc.count; ++i) s2 += double(wa[fc.offset + i]) * wa[fc.offset + i];
  EXPECT_NEAR(std::sqrt(s2 / fc.count), 0.02, 0.002);
  // Weights read back equal what init returned (bf16 values widened exactly).
  EXPECT_EQ(a.weights_as_f32(), wa);
}

std::vector<uint16_t> train_steps_bits(int threads) {
  auto backend = make_cpu_backend(threads);
  GPT model(*backend, small_config(), DType::kBF16);
  model.init_weights(3);
  std::vector<int32_t> in, tg;
  make_batch(2, 8, 50, in, tg);
  model.zero_grads();
  model.forward(in.data(), tg.data(), 2, 8);
  model.backward(1.0f);
  std::vector<uint16_t> bits(model.layout().total_size());
  backend->copy_to_host(bits.data(), model.grads(), bits.size() * 2);
  return bits;
}

TEST(GptModel, Bf16GradientsDoNotDependOnThreadCount) {
  const auto one = train_steps_bits(1);
  const auto two = train_steps_bits(2);
  omp_set_num_threads(2);
  EXPECT_EQ(one, two);
}

// fp32 gradients of bf16 weights (g=f32): the same bf16 forward and activation
// gradients, the weight gradients stored unrounded. Every tensor but wte gets
// one contribution per backward, so its fp32 gradient rounds to exactly the
// bf16 model's; wte adds the encoder's part to the classifier's, which the
// bf16 model rounds twice: within one bf16 ulp there. Two micro-batches
// accumulate in fp32. The gradient buffer is accounted at 4 bytes a parameter.
TEST(GptModel, Fp32GradientsOfBf16WeightsRoundToTheBf16Gradients) {
  auto backend = make_cpu_backend(0);
  const GPTConfig c = small_config();
  GPT b16(*backend, c, DType::kBF16);
  GPT f32(*backend, c, DType::kBF16, DType::kBF16, DType::kF32);
  EXPECT_EQ(f32.grad_dtype(), DType::kF32);
  EXPECT_EQ(f32.grad_bytes(), ParamLayout(c).total_size() * 4);
  EXPECT_EQ(backend->memory().current[int(MemCategory::kGrads)],
            ParamLayout(c).total_size() * (2 + 4));
  b16.init_weights(3);
  f32.init_weights(3);
  std::vector<int32_t> in, tg;
  make_batch(2, 8, 50, in, tg);
  const float loss16 = b16.forward(in.data(), tg.data(), 2, 8);
  const float loss32 = f32.forward(in.data(), tg.data(), 2, 8);
  EXPECT_EQ(loss16, loss32);
  b16.backward(1.0f, GradWrite::kOverwrite);
  f32.backward(1.0f, GradWrite::kOverwrite);
  const size_t n = b16.layout().total_size();
  std::vector<bf16> g16(n);
  std::vector<float> g32(n);
  backend->copy_to_host(g16.data(), b16.grads(), n * 2);
  backend->copy_to_host(g32.data(), f32.grads(), n * 4);
  const ParamTensor& wte = b16.layout().get("wte");
  const size_t C = size_t(c.channels);
  // Rows of input tokens have the encoder's part too: the bf16 model rounds
  // the classifier's part, then the sum; the parts may cancel, so the bound is
  // an ulp of the largest gradient in wte rather than of the element.
  std::vector<bool> input_row(size_t(c.vocab_size), false);
  for (const int32_t t : in) input_row[size_t(t)] = true;
  float wte_max = 0.0f;
  for (size_t i = wte.offset; i < wte.offset + wte.count; ++i) {
    wte_max = std::max(wte_max, std::fabs(g32[i]));
  }
  size_t unrepresentable = 0;
  for (size_t i = 0; i < n; ++i) {
    const float want = bf16_to_float(g16[i]);
    const float rounded = bf16_to_float(float_to_bf16_rn(g32[i]));
    unrepresentable += rounded != g32[i];
    const bool two_parts = i >= wte.offset && i < wte.offset + wte.count &&
                           (i - wte.offset) / C < input_row.size() &&
                           input_row[(i - wte.offset) / C];
    if (two_parts) {
      ASSERT_LE(std::fabs(rounded - want), bf16_ulp(wte_max)) << "wte element " << i;
    } else {
      ASSERT_EQ(rounded, want) << "element " << i;
    }
  }
  EXPECT_GT(unrepresentable, n / 4) << "the fp32 gradients look rounded to bf16";
  // A second micro-batch accumulates: old + new in fp32.
  f32.forward(in.data(), tg.data(), 2, 8);
  f32.backward(1.0f, GradWrite::kAccumulate);
  std::vector<float> twice(n);
  backend->copy_to_host(twice.data(), f32.grads(), n * 4);
  for (size_t i = 0; i < n; ++i) {
    if (i >= wte.offset && i < wte.offset + wte.count) {  // (g + classifier) + encoder
      ASSERT_NEAR(twice[i], 2.0f * g32[i], 1e-6f * std::fabs(g32[i]) + 1e-12f) << "wte " << i;
    } else {
      ASSERT_EQ(twice[i], g32[i] + g32[i]) << "element " << i;
    }
  }
  // fp32 gradients go with bf16 weights computed in bf16 only.
  EXPECT_THROW(GPT(*backend, c, DType::kF32, DType::kBF16, DType::kBF16), std::invalid_argument);
  EXPECT_THROW(GPT(*backend, c, DType::kF32, DType::kF32, DType::kBF16), std::invalid_argument);
}

TEST(GptModel, RejectsTokensOutsideVocabularyAndOverlongSequences) {
  auto backend = make_cpu_backend(0);
  GPT model(*backend, small_config(), DType::kF32);
  model.init_weights(1);
  std::vector<int32_t> in(8, 1), tg(8, 1);
  in[2] = 50;
  EXPECT_THROW(model.forward(in.data(), tg.data(), 1, 8), std::invalid_argument);
  in[2] = 1;
  tg[5] = 99;
  EXPECT_THROW(model.forward(in.data(), tg.data(), 1, 8), std::invalid_argument);
  std::vector<int32_t> long_in(9, 1);
  EXPECT_THROW(model.forward(long_in.data(), nullptr, 1, 9), std::invalid_argument);
}

TEST(GptModel, MemoryIsAccountedByCategory) {
  auto backend = make_cpu_backend(0);
  const GPTConfig c = small_config();
  {
    GPT model(*backend, c, DType::kBF16);
    std::vector<int32_t> in, tg;
    make_batch(2, 8, 50, in, tg);
    model.forward(in.data(), tg.data(), 2, 8);
    const MemoryStats m = backend->memory();
    const size_t wbytes = ParamLayout(c).total_size() * 2;
    EXPECT_EQ(m.current[int(MemCategory::kWeights)], wbytes);
    EXPECT_EQ(m.current[int(MemCategory::kGrads)], wbytes);
    EXPECT_GT(m.current[int(MemCategory::kActivations)], 0u);
  }
  const MemoryStats after = backend->memory();
  EXPECT_EQ(after.current[int(MemCategory::kWeights)], 0u);
  EXPECT_EQ(after.current[int(MemCategory::kActivations)], 0u);
  EXPECT_GT(after.peak[int(MemCategory::kActivations)], 0u);
}

TEST(Backend, PlantedMemoryLimitThrowsOutOfMemory) {
  auto backend = make_cpu_backend(0);
  backend->set_memory_limit(1 << 20);
  void* p = backend->allocate(512 << 10, MemCategory::kWeights);
  EXPECT_THROW(backend->allocate(600 << 10, MemCategory::kGrads), OutOfMemory);
  backend->release(p);
  EXPECT_NO_THROW(backend->release(backend->allocate(600 << 10, MemCategory::kGrads)));
}

}  // namespace
}  // namespace srkit

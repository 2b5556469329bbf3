// Hugging Face GPT-2 folders, library side: the dtype conversions the import
// uses (F16 included), the name mapping against a fixture written from HF's
// layout, config.json, export -> import round trips bit for bit, and the
// folders an import must refuse, with the tensor or file named.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "kernels/common/bf16.h"
#include "kernels/common/fp_formats.h"
#include "kernels/cpu/cast.h"
#include "lib/backend/backend.h"
#include "lib/checkpoint/float_tensors.h"
#include "lib/checkpoint/hf_gpt2.h"
#include "lib/checkpoint/hf_gpt2_config.h"
#include "lib/checkpoint/hf_gpt2_names.h"
#include "lib/checkpoint/safetensors.h"
#include "lib/model/gpt.h"
#include "tests/test_hf_support.h"
#include "tests/test_paths.h"

namespace srkit {
namespace {

namespace fs = std::filesystem;
using namespace testing_hf;

fs::path fresh_dir(const std::string& name) { return testing_paths::fresh_dir("hf", name); }

nlohmann::json fixture() {
  std::ifstream in(std::string(SRKIT_SOURCE_DIR) + "/tests/fixtures/hf_gpt2_layout.json");
  return nlohmann::json::parse(in);
}

uint16_t bits16(const std::vector<char>& v, size_t i) {
  uint16_t b;
  std::memcpy(&b, v.data() + 2 * i, 2);
  return b;
}

uint32_t f32_bits(float f) { return float_as_bits(f); }

// ---- dtype conversions ---------------------------------------------------------

TEST(FloatTensors, F16WidensExactlyForEveryBitPattern) {
  std::vector<fp16> all(65536 + 37);  // the tail past the last whole block too
  for (size_t i = 0; i < all.size(); ++i) all[i].bits = uint16_t(i);
  std::vector<float> wide(all.size());
  cpu::cast_f16_to_f32(all.data(), wide.data(), all.size());
  for (size_t i = 0; i < all.size(); ++i) {
    const float want = fp16_to_float(all[i]);
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(wide[i])) << i;
    } else {
      ASSERT_EQ(f32_bits(wide[i]), f32_bits(want)) << i;
    }
  }
  // Known answers: one, the smallest subnormal, the largest finite, -Inf, -0.
  EXPECT_EQ(wide[0x3c00], 1.0f);
  EXPECT_EQ(wide[0x0001], std::ldexp(1.0f, -24));
  EXPECT_EQ(wide[0x7bff], 65504.0f);
  EXPECT_EQ(wide[0xfc00], -INFINITY);
  EXPECT_EQ(f32_bits(wide[0x8000]), 0x80000000u);
}

TEST(FloatTensors, NarrowingToBf16RoundsToNearestEven) {
  // fp16 1 + k/1024: bf16 keeps steps of 8/1024 at 1, so k = 3 rounds down, k = 5
  // up, k = 4 (a tie) to even 1.0, k = 12 (a tie) to even 1 + 16/1024.
  const std::vector<uint16_t> f16 = {0x3c03, 0x3c05, 0x3c04, 0x3c0c};
  const std::vector<uint16_t> want = {0x3f80, 0x3f81, 0x3f80, 0x3f82};
  std::vector<uint16_t> out(f16.size());
  convert_float_elements(f16.data(), "F16", out.data(), DType::kBF16, f16.size());
  EXPECT_EQ(out, want);
  // The same values as F32 narrow the same way.
  std::vector<float> f32(f16.size());
  for (size_t i = 0; i < f16.size(); ++i) f32[i] = fp16_to_float(fp16{f16[i]});
  convert_float_elements(f32.data(), "F32", out.data(), DType::kBF16, f32.size());
  EXPECT_EQ(out, want);
  // BF16 -> F32 is exact.
  std::vector<float> back(want.size());
  convert_float_elements(want.data(), "BF16", back.data(), DType::kF32, want.size());
  EXPECT_EQ(back[3], 1.0f + 16.0f / 1024.0f);
}

TEST(FloatTensors, EqualDtypesCopyTheBitsUnchanged) {
  const uint16_t snan_bf16 = 0x7f81;  // RN would quieten it
  uint16_t out16 = 0;
  convert_float_elements(&snan_bf16, "BF16", &out16, DType::kBF16, 1);
  EXPECT_EQ(out16, snan_bf16);
  const uint32_t snan_f32 = 0x7f800001u;
  uint32_t out32 = 0;
  convert_float_elements(&snan_f32, "F32", &out32, DType::kF32, 1);
  EXPECT_EQ(out32, snan_f32);
}

TEST(FloatTensors, OtherDtypesAreRefusedByName) {
  const int32_t x = 1;
  float out;
  EXPECT_FALSE(is_convertible_float_dtype("I32"));
  try {
    convert_float_elements(&x, "I32", &out, DType::kF32, 1);
    FAIL() << "I32 converted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("I32"), std::string::npos);
  }
}

TEST(SafetensorsReadAs, ConvertsF16AndChecksDtypeAndCount) {
  const fs::path dir = fresh_dir("read_as");
  const std::string path = (dir / "t.safetensors").string();
  const std::vector<uint16_t> half = {0x3c00, 0xc000, 0x3c05};  // 1, -2, 1 + 5/1024
  const std::vector<int32_t> ints = {7, 8};
  save_safetensors(path, {{"h", "F16", {3}, half.data(), 6}, {"i", "I32", {2}, ints.data(), 8}},
                   {});
  const SafetensorsReader r(path);
  std::vector<float> f(3);
  r.read_as("h", DType::kF32, f.data(), 3);
  EXPECT_EQ(f, (std::vector<float>{1.0f, -2.0f, 1.0f + 5.0f / 1024.0f}));
  std::vector<uint16_t> b(3);
  r.read_as("h", DType::kBF16, b.data(), 3);
  EXPECT_EQ(b, (std::vector<uint16_t>{0x3f80, 0xc000, 0x3f81}));
  try {
    r.read_as("h", DType::kF32, f.data(), 2);
    FAIL() << "wrong count accepted";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("'h'"), std::string::npos) << e.what();
  }
  try {
    r.read_as("i", DType::kF32, f.data(), 2);
    FAIL() << "I32 accepted";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("'i' has dtype I32"), std::string::npos) << e.what();
  }
}

// ---- the name mapping ----------------------------------------------------------

TEST(HfGpt2Names, MatchTheFixtureWrittenFromHfsLayout) {
  const nlohmann::json fx = fixture();
  for (const char* model : {"tiny", "gpt2-124m"}) {
    const nlohmann::json& want = fx.at("models").at(model).at("tensors");
    const std::vector<HfTensor> have = hf_gpt2_tensors(gpt_preset(model));
    ASSERT_EQ(have.size(), want.size()) << model;
    for (size_t i = 0; i < have.size(); ++i) {
      EXPECT_EQ(have[i].name, want[i][0].get<std::string>()) << model << " #" << i;
      EXPECT_EQ(have[i].shape, want[i][1].get<std::vector<int64_t>>()) << have[i].name;
    }
  }
  // The gpt2-124m shapes everyone knows.
  const std::vector<HfTensor> t = hf_gpt2_tensors(gpt_preset("gpt2-124m"));
  EXPECT_EQ(t[0].shape, (std::vector<int64_t>{50257, 768}));
  EXPECT_EQ(t[1].shape, (std::vector<int64_t>{1024, 768}));
  EXPECT_EQ(t[4].name, "transformer.h.0.attn.c_attn.weight");
  EXPECT_EQ(t[4].shape, (std::vector<int64_t>{768, 2304}));
}

TEST(HfGpt2Names, CoverEveryParameterOnceAndDropOnlyThePaddedRows) {
  const GPTConfig c = padded_config();
  const ParamLayout layout(c);
  std::vector<float> flat(layout.total_size(), 0.0f);
  for (const ParamTensor& t : layout.tensors()) {
    for (size_t i = 0; i < t.count; ++i) flat[t.offset + i] = float(t.offset + i + 1);
  }
  std::vector<float> back(flat.size(), 0.0f);
  size_t hf_elements = 0;
  for (const HfTensor& t : hf_gpt2_tensors(c)) {
    std::vector<float> v(t.count());
    hf_tensor_from_flat(t, layout, flat.data(), v.data(), sizeof(float));
    hf_tensor_to_flat(t, layout, v.data(), back.data(), sizeof(float));
    hf_elements += t.count();
  }
  const size_t padded = size_t(c.padded_vocab_size() - c.vocab_size) * size_t(c.channels);
  EXPECT_EQ(hf_elements, layout.num_params() - padded);
  std::vector<float> want = flat;
  const ParamTensor& wte = layout.get("wte");
  for (size_t i = size_t(c.vocab_size) * c.channels; i < wte.count; ++i) want[wte.offset + i] = 0;
  EXPECT_EQ(back, want);
}

TEST(HfGpt2Names, Conv1DWeightsAreTheTransposeOfLinearOnes) {
  const GPTConfig c = padded_config();
  const ParamLayout layout(c);
  const size_t C = size_t(c.channels);
  std::vector<float> flat(layout.total_size());
  for (size_t i = 0; i < flat.size(); ++i) flat[i] = float(i);
  struct Case {
    const char* hf;
    const char* param;
    size_t out, in;  // srkit's [out, in] per layer
  };
  const Case cases[] = {{"transformer.h.1.attn.c_attn.weight", "h.attn.c_attn.weight", 3 * C, C},
                        {"transformer.h.1.attn.c_proj.weight", "h.attn.c_proj.weight", C, C},
                        {"transformer.h.1.mlp.c_fc.weight", "h.mlp.c_fc.weight", 4 * C, C},
                        {"transformer.h.1.mlp.c_proj.weight", "h.mlp.c_proj.weight", C, 4 * C}};
  for (const Case& k : cases) {
    for (const HfTensor& t : hf_gpt2_tensors(c)) {
      if (t.name != k.hf) continue;
      ASSERT_EQ(t.shape, (std::vector<int64_t>{int64_t(k.in), int64_t(k.out)})) << k.hf;
      std::vector<float> v(t.count());
      hf_tensor_from_flat(t, layout, flat.data(), v.data(), sizeof(float));
      const size_t layer1 = layout.get(k.param).offset + k.out * k.in;
      for (size_t i = 0; i < k.in; ++i) {
        for (size_t o = 0; o < k.out; ++o) {
          ASSERT_EQ(v[i * k.out + o], flat[layer1 + o * k.in + i]) << k.hf << " " << i << "," << o;
        }
      }
    }
  }
}

TEST(HfGpt2Names, OnlyTheMaskBuffersAreSkipped) {
  EXPECT_TRUE(is_hf_gpt2_buffer("h.0.attn.bias"));
  EXPECT_TRUE(is_hf_gpt2_buffer("transformer.h.11.attn.bias"));
  EXPECT_TRUE(is_hf_gpt2_buffer("transformer.h.3.attn.masked_bias"));
  EXPECT_FALSE(is_hf_gpt2_buffer("transformer.h.0.attn.c_attn.bias"));
  EXPECT_FALSE(is_hf_gpt2_buffer("h.attn.bias"));
  EXPECT_FALSE(is_hf_gpt2_buffer("transformer.h.0.attn.bias.x"));
  EXPECT_FALSE(is_hf_gpt2_buffer("transformer.transformer.h.0.attn.bias"));
  EXPECT_FALSE(is_hf_gpt2_buffer("h.0x.attn.bias"));
  EXPECT_FALSE(is_hf_gpt2_buffer("h.1.attn.masked_biasx"));
}

// ---- config.json ---------------------------------------------------------------

TEST(HfGpt2Config, HoldsEveryKeyOfTheFixture) {
  const nlohmann::json fx = fixture();
  for (const char* model : {"tiny", "gpt2-124m"}) {
    const nlohmann::json have = hf_gpt2_config_json(gpt_preset(model), DType::kBF16);
    for (const auto& [key, value] : fx.at("models").at(model).at("config").items()) {
      ASSERT_TRUE(have.contains(key)) << model << ": " << key;
      EXPECT_EQ(have.at(key), value) << model << ": " << key;
    }
    EXPECT_EQ(have.at("torch_dtype"), "bfloat16");
  }
  EXPECT_EQ(hf_gpt2_config_json(gpt_preset("tiny"), DType::kF32).at("torch_dtype"), "float32");
}

TEST(HfGpt2Config, ReadsBackTheShapeItWrites) {
  const fs::path dir = fresh_dir("config_back") / "my-model";
  write_config(dir, hf_gpt2_config_json(padded_config(), DType::kF32));
  const GPTConfig c = read_hf_gpt2_config(dir.string());
  EXPECT_TRUE(c.same_shape(padded_config()));
  EXPECT_EQ(c.name, "my-model");
  EXPECT_EQ(read_hf_gpt2_config(dir.string() + "/").name, "my-model");
}

TEST(HfGpt2Config, RefusesSettingsThatChangeTheFunction) {
  const fs::path dir = fresh_dir("config_bad");
  struct Case {
    const char* key;
    nlohmann::ordered_json value;  // null: remove the key
    const char* named;             // in the message
  };
  const Case cases[] = {
      {"model_type", "llama", "model_type"},
      {"n_embd", nullptr, "n_embd"},
      {"n_head", "12", "n_head"},
      {"n_layer", 0, "n_layer"},
      {"activation_function", "relu", "activation_function"},
      {"layer_norm_epsilon", 1e-6, "layer_norm_epsilon"},
      {"n_inner", 100, "n_inner"},
      {"tie_word_embeddings", false, "tie_word_embeddings"},
      {"scale_attn_weights", false, "scale_attn_weights"},
      {"scale_attn_by_inverse_layer_idx", true, "scale_attn_by_inverse_layer_idx"},
      {"add_cross_attention", true, "add_cross_attention"},
      {"vocab_size", 70000, "vocab"},
  };
  for (const Case& k : cases) {
    nlohmann::ordered_json j = hf_gpt2_config_json(padded_config(), DType::kF32);
    if (k.value.is_null()) {
      j.erase(k.key);
    } else {
      j[k.key] = k.value;
    }
    write_config(dir, j);
    try {
      read_hf_gpt2_config(dir.string());
      ADD_FAILURE() << k.key << " accepted";
    } catch (const std::runtime_error& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find(hf_config_path(dir.string())), std::string::npos) << what;
      EXPECT_NE(what.find(k.named), std::string::npos) << what;
    }
  }
  // The other tanh-GELU spelling and an explicit 4 n_embd are the same function.
  nlohmann::ordered_json j = hf_gpt2_config_json(padded_config(), DType::kF32);
  j["activation_function"] = "gelu_pytorch_tanh";
  j["n_inner"] = 4 * padded_config().channels;
  write_config(dir, j);
  EXPECT_NO_THROW(read_hf_gpt2_config(dir.string()));
}

// ---- export ----------------------------------------------------------------------

TEST(HfGpt2Export, WritesTheFixtureLayoutWithFormatMetadata) {
  const fs::path dir = fresh_dir("export_layout");
  const GPTConfig c = gpt_preset("tiny");
  const std::vector<float> flat = pattern_weights(c);
  const nlohmann::json fx = fixture().at("models").at("tiny");
  for (DType dtype : {DType::kF32, DType::kBF16}) {
    save_hf_gpt2(dir.string(), c, flat.data(), DType::kF32, dtype);
    const SafetensorsReader r(hf_weights_path(dir.string()));
    EXPECT_EQ(r.metadata(), (std::map<std::string, std::string>{{"format", "pt"}}));
    const std::vector<std::string> names = r.names();
    const nlohmann::json& want = fx.at("tensors");
    ASSERT_EQ(names.size(), want.size());  // no lm_head.weight, no attn.bias buffers
    for (size_t i = 0; i < names.size(); ++i) {
      EXPECT_EQ(names[i], want[i][0].get<std::string>());
      EXPECT_EQ(r.info(names[i]).shape, want[i][1].get<std::vector<int64_t>>()) << names[i];
      EXPECT_EQ(r.info(names[i]).dtype, safetensors_dtype_of(dtype)) << names[i];
    }
    std::ifstream in(hf_config_path(dir.string()));
    const nlohmann::json config = nlohmann::json::parse(in);
    for (const auto& [key, value] : fx.at("config").items()) {
      EXPECT_EQ(config.at(key), value) << key;
    }
  }
}

// ---- round trips -------------------------------------------------------------------

class HfGpt2RoundTrip : public ::testing::TestWithParam<DType> {};

TEST_P(HfGpt2RoundTrip, EveryTensorBitForBitPaddedRowsZeroHeadTied) {
  const DType dtype = GetParam();
  const fs::path dir = fresh_dir(std::string("round_") + dtype_name(dtype));
  const GPTConfig c = padded_config();
  auto backend = make_cpu_backend(1);
  GPT source(*backend, c, dtype);
  std::vector<float> w = source.init_weights(7);
  const ParamLayout& layout = source.layout();
  const ParamTensor& wte = layout.get("wte");
  const size_t real = size_t(c.vocab_size) * c.channels;
  for (size_t i = real; i < wte.count; ++i) w[wte.offset + i] = 0.5f;  // padded rows, dropped
  source.set_weights_from_f32(w);
  const std::vector<int32_t> tokens = {3, 249, 17, 0, 100, 5, 88, 248};
  source.forward(tokens.data(), nullptr, 1, int(tokens.size()));
  const std::vector<float> logits_before = source.logits(0, 7);

  // Exported from the model's own bytes, as sr-export does from a checkpoint.
  std::vector<char> want(source.weight_bytes());
  backend->copy_to_host(want.data(), source.weights(), want.size());
  save_hf_gpt2(dir.string(), c, want.data(), dtype, dtype);
  EXPECT_FALSE(SafetensorsReader(hf_weights_path(dir.string())).has(kHfTiedHead));
  GPT imported(*backend, c, dtype);
  imported.init_weights(99);  // other values everywhere, to be overwritten
  load_hf_gpt2(dir.string(), imported);

  const size_t es = dtype_size(dtype);
  std::vector<char> have(imported.weight_bytes());
  backend->copy_to_host(have.data(), imported.weights(), have.size());
  std::memset(want.data() + (wte.offset + real) * es, 0, (wte.count - real) * es);
  for (const ParamTensor& t : layout.tensors()) {
    EXPECT_EQ(std::memcmp(have.data() + t.offset * es, want.data() + t.offset * es, t.count * es),
              0)
        << t.name;
  }
  EXPECT_EQ(have, want);  // alignment padding included
  // The classifier is wte: the same logits from the imported weights.
  imported.forward(tokens.data(), nullptr, 1, int(tokens.size()));
  const std::vector<float> logits_after = imported.logits(0, 7);
  ASSERT_EQ(logits_after.size(), size_t(c.vocab_size));
  EXPECT_EQ(std::memcmp(logits_after.data(), logits_before.data(), logits_after.size() * 4), 0);
}

INSTANTIATE_TEST_SUITE_P(Dtypes, HfGpt2RoundTrip, ::testing::Values(DType::kBF16, DType::kF32),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

TEST(HfGpt2RoundTrip, AcrossDtypesF32NarrowsByRnAndBf16WidensExactly) {
  const fs::path dir = fresh_dir("cross");
  const GPTConfig c = padded_config();
  const ParamLayout layout(c);
  const std::vector<float> flat = pattern_weights(c);
  // f32 weights stored as BF16, read back as f32: RN(x) widened.
  save_hf_gpt2(dir.string(), c, flat.data(), DType::kF32, DType::kBF16);
  const std::vector<char> as_f32 = read_hf_gpt2_weights(dir.string(), c, DType::kF32);
  std::vector<float> got(layout.total_size());
  std::memcpy(got.data(), as_f32.data(), as_f32.size());
  const ParamTensor& wte = layout.get("wte");
  for (const ParamTensor& t : layout.tensors()) {
    for (size_t i = 0; i < t.count; ++i) {
      const bool padded = &t == &wte && i >= size_t(c.vocab_size) * c.channels;
      const float want = padded ? 0.0f : bf16_to_float(float_to_bf16_rn(flat[t.offset + i]));
      ASSERT_EQ(f32_bits(got[t.offset + i]), f32_bits(want)) << t.name << " " << i;
    }
  }
  // bf16 weights stored as F32, read back as bf16: the same bits.
  std::vector<uint16_t> bf(layout.total_size());
  for (size_t i = 0; i < bf.size(); ++i) bf[i] = float_to_bf16_rn(got[i]).bits;
  save_hf_gpt2(dir.string(), c, bf.data(), DType::kBF16, DType::kF32);
  const std::vector<char> as_bf16 = read_hf_gpt2_weights(dir.string(), c, DType::kBF16);
  for (size_t i = 0; i < bf.size(); ++i) ASSERT_EQ(bits16(as_bf16, i), bf[i]) << i;
}

// ---- import: what HF's own files look like ------------------------------------------

TEST(HfGpt2Import, AcceptsBareNamesMaskBuffersATiedHeadAndF16) {
  const fs::path dir = fresh_dir("hf_style");
  const GPTConfig c = padded_config();
  const ParamLayout layout(c);
  const std::vector<float> flat = pattern_weights(c);
  std::vector<Entry> entries = hf_entries(c, flat, "F16", /*prefixed=*/false);
  const Entry wte = entries.front();
  const int64_t T = c.max_seq_len;
  entries.push_back({"h.0.attn.bias", "F32", {1, 1, T, T}, std::vector<char>(size_t(T * T) * 4)});
  entries.push_back({"h.1.attn.masked_bias", "F32", {}, std::vector<char>(4)});
  entries.push_back({kHfTiedHead, wte.dtype, wte.shape, wte.bytes});
  write_entries(dir, entries);
  write_config(dir, hf_gpt2_config_json(c, DType::kF32));

  const std::vector<char> f32 = read_hf_gpt2_weights(dir.string(), c, DType::kF32);
  const std::vector<char> bf16 = read_hf_gpt2_weights(dir.string(), c, DType::kBF16);
  const ParamTensor& wte_param = layout.get("wte");
  for (const ParamTensor& t : layout.tensors()) {
    for (size_t i = 0; i < t.count; ++i) {
      const size_t k = t.offset + i;
      const bool padded = &t == &wte_param && i >= size_t(c.vocab_size) * c.channels;
      const float half = padded ? 0.0f : fp16_to_float(float_to_fp16_rn(flat[k]));
      float have;
      std::memcpy(&have, f32.data() + 4 * k, 4);
      ASSERT_EQ(f32_bits(have), f32_bits(half)) << t.name << " " << i;
      ASSERT_EQ(bits16(bf16, k), float_to_bf16_rn(half).bits) << t.name << " " << i;
    }
  }
}

// ---- import: what it must refuse --------------------------------------------------

struct Refusal {
  std::string label;
  std::function<void(const fs::path&)> make;  // writes the bad folder
  std::vector<std::string> named;             // in the message
};

constexpr const char* kProj = "transformer.h.1.attn.c_proj.weight";

std::vector<Refusal> refusals() {
  const GPTConfig c = padded_config();
  const std::vector<float> flat = pattern_weights(c);
  auto with = [c, flat](std::function<void(std::vector<Entry>&)> edit) {
    return [c, flat, edit](const fs::path& dir) {
      std::vector<Entry> e = hf_entries(c, flat, "F32");
      edit(e);
      write_entries(dir, e);
      write_config(dir, hf_gpt2_config_json(c, DType::kF32));
    };
  };
  const std::string fc = "transformer.h.1.mlp.c_fc.weight";
  return {
      {"missing tensor",
       with([](auto& e) { e.erase(e.begin() + (find_entry(e, kProj) - e.data())); }),
       {"missing tensor", kProj, "[32, 32]"}},
      {"misshaped tensor",
       with([fc](auto& e) {
         Entry* t = find_entry(e, fc);
         std::swap(t->shape[0], t->shape[1]);  // stored untransposed
       }),
       {fc, "[128, 32]", "expected [32, 128]"}},
      {"unsupported dtype",
       with([](auto& e) {
         e[1].dtype = "I32";  // same size as F32
       }),
       {"transformer.wpe.weight", "I32"}},
      {"unknown dtype",
       [c, flat](const fs::path& dir) {
         write_folder(dir, c, flat);
         patch_file(dir / kHfWeightsFile, "\"dtype\":\"F32\"", "\"dtype\":\"Q32\"");
       },
       {"transformer.wte.weight", "Q32"}},
      {"config disagrees with the tensors",
       [c, flat](const fs::path& dir) {
         write_folder(dir, c, flat);
         GPTConfig wider = c;
         wider.channels = 64;
         write_config(dir, hf_gpt2_config_json(wider, DType::kF32));
       },
       {"transformer.wte.weight", "[250, 32]", "expected [250, 64]", "config.json"}},
      {"missing config.json",
       [c, flat](const fs::path& dir) {
         write_folder(dir, c, flat);
         fs::remove(dir / kHfConfigFile);
       },
       {"config.json", "missing"}},
      {"missing model.safetensors",
       [c, flat](const fs::path& dir) {
         write_folder(dir, c, flat);
         fs::remove(dir / kHfWeightsFile);
         std::ofstream(dir / "pytorch_model.bin") << "pickle";
       },
       {"model.safetensors", "pytorch_model.bin"}},
      {"unexpected tensor",
       with([](auto& e) {
         e.push_back({"transformer.h.0.attn.q_attn.weight", "F32", {1}, std::vector<char>(4)});
       }),
       {"unexpected tensor", "transformer.h.0.attn.q_attn.weight"}},
      {"a layer too many",
       with([](auto& e) {
         Entry extra = e[2];
         extra.name = "transformer.h.2.ln_1.weight";
         e.push_back(extra);
       }),
       {"transformer.h.2.ln_1.weight"}},
      {"both spellings",
       with([](auto& e) {
         Entry bare = e[1];
         bare.name = "wpe.weight";
         e.push_back(bare);
       }),
       {"transformer.wpe.weight", "'wpe.weight'"}},
      {"untied head",
       with([](auto& e) {
         Entry head = e[0];
         head.name = kHfTiedHead;
         head.bytes[0] ^= 1;
         e.push_back(head);
       }),
       {"lm_head.weight", "tied"}},
  };
}

TEST(HfGpt2Import, RefusesBadFoldersNamingTheTensorOrFile) {
  auto backend = make_cpu_backend(1);
  for (const Refusal& r : refusals()) {
    const fs::path dir = fresh_dir("refuse");
    r.make(dir);
    try {
      // As sr-train --init-from: the shape from config.json, then the weights.
      GPT model(*backend, read_hf_gpt2_config(dir.string()), DType::kBF16);
      load_hf_gpt2(dir.string(), model);
      ADD_FAILURE() << r.label << ": accepted";
    } catch (const std::runtime_error& e) {
      const std::string what = e.what();
      EXPECT_EQ(what.find('\n'), std::string::npos) << r.label << ": " << what;
      for (const std::string& part : r.named) {
        EXPECT_NE(what.find(part), std::string::npos) << r.label << ": " << what;
      }
    }
  }
}

TEST(HfGpt2Import, RefusesAFolderForAnotherShape) {
  const fs::path dir = fresh_dir("other_shape");
  GPTConfig c = padded_config();
  write_folder(dir, c, pattern_weights(c));
  auto backend = make_cpu_backend(1);
  c.num_layers = 3;
  GPT model(*backend, c, DType::kF32);
  try {
    load_hf_gpt2(dir.string(), model);
    FAIL() << "accepted";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("L=2"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("L=3"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace srkit

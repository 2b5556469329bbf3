// Helpers of the Hugging Face GPT-2 folder tests: a small model, and folders
// laid out tensor by tensor so that a test can drop, reshape or retype one.
#pragma once

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "kernels/common/bf16.h"
#include "kernels/common/fp_formats.h"
#include "lib/checkpoint/hf_gpt2_config.h"
#include "lib/checkpoint/hf_gpt2_names.h"
#include "lib/checkpoint/safetensors.h"
#include "lib/model/gpt_config.h"
#include "lib/model/param_layout.h"

namespace srkit::testing_hf {

// Vocabulary 250 pads to 256: six padded wte rows.
inline GPTConfig padded_config() {
  GPTConfig c;
  c.name = "padded";
  c.num_layers = 2;
  c.channels = 32;
  c.num_heads = 2;
  c.max_seq_len = 16;
  c.vocab_size = 250;
  return c;
}

// One tensor of a hand-made model.safetensors.
struct Entry {
  std::string name;
  std::string dtype;  // F32, F16 or BF16 (or anything, for the rejection tests)
  std::vector<int64_t> shape;
  std::vector<char> bytes;
};

// fp32 values stored as dtype (F32, F16 or BF16, narrowing to nearest even).
inline std::vector<char> encode(const std::vector<float>& v, const std::string& dtype) {
  std::vector<char> out;
  if (dtype == "F32") {
    out.resize(v.size() * 4);
    std::memcpy(out.data(), v.data(), out.size());
  } else {
    out.resize(v.size() * 2);
    for (size_t i = 0; i < v.size(); ++i) {
      const uint16_t bits =
          dtype == "F16" ? float_to_fp16_rn(v[i]).bits : float_to_bf16_rn(v[i]).bits;
      std::memcpy(out.data() + 2 * i, &bits, 2);
    }
  }
  return out;
}

// Every HF tensor of `config` from `flat` (fp32 image of the flat parameter
// buffer), stored as dtype, named with the "transformer." prefix or without.
inline std::vector<Entry> hf_entries(const GPTConfig& config, const std::vector<float>& flat,
                                     const std::string& dtype, bool prefixed = true) {
  const ParamLayout layout(config);
  std::vector<Entry> out;
  for (const HfTensor& t : hf_gpt2_tensors(config)) {
    std::vector<float> v(t.count());
    hf_tensor_from_flat(t, layout, flat.data(), v.data(), sizeof(float));
    out.push_back({prefixed ? t.name : hf_bare_name(t), dtype, t.shape, encode(v, dtype)});
  }
  return out;
}

inline Entry* find_entry(std::vector<Entry>& entries, const std::string& name) {
  for (Entry& e : entries) {
    if (e.name == name) return &e;
  }
  return nullptr;
}

inline void write_entries(const std::filesystem::path& dir, const std::vector<Entry>& entries) {
  std::filesystem::create_directories(dir);
  std::vector<TensorRef> refs;
  for (const Entry& e : entries) {
    refs.push_back({e.name, e.dtype, e.shape, e.bytes.data(), e.bytes.size()});
  }
  save_safetensors((dir / kHfWeightsFile).string(), refs, {{"format", "pt"}});
}

inline void write_config(const std::filesystem::path& dir, const nlohmann::ordered_json& j) {
  std::filesystem::create_directories(dir);
  std::ofstream(dir / kHfConfigFile) << j.dump(2);
}

// A complete folder: config.json for `config`, every tensor as dtype.
inline void write_folder(const std::filesystem::path& dir, const GPTConfig& config,
                         const std::vector<float>& flat, const std::string& dtype = "F32") {
  write_entries(dir, hf_entries(config, flat, dtype));
  write_config(dir, hf_gpt2_config_json(config, DType::kF32));
}

// Replaces the first occurrence of `from` in a file by `to` of the same length
// (a dtype name in a safetensors header, keeping every offset valid).
inline void patch_file(const std::filesystem::path& path, const std::string& from,
                       const std::string& to) {
  std::ifstream in(path, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  in.close();
  const size_t at = bytes.find(from);
  if (at == std::string::npos || from.size() != to.size()) {
    throw std::logic_error("patch_file: '" + from + "' not found or lengths differ");
  }
  bytes.replace(at, from.size(), to);
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

// Deterministic fp32 values for every parameter element (alignment padding zero).
inline std::vector<float> pattern_weights(const GPTConfig& config, float scale = 1e-3f) {
  const ParamLayout layout(config);
  std::vector<float> flat(layout.total_size(), 0.0f);
  for (const ParamTensor& t : layout.tensors()) {
    for (size_t i = 0; i < t.count; ++i) {
      // Distinct, signed, not all representable in bf16 or fp16.
      const size_t k = t.offset + i;
      flat[k] = scale * (float(int((k * 2654435761u) % 2001u) - 1000) + 0.3f);
    }
  }
  return flat;
}

}  // namespace srkit::testing_hf

#include "lib/checkpoint/hf_gpt2_names.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>
#include <string_view>

namespace srkit {
namespace {

struct Rule {
  const char* param;      // srkit name; stacked when it starts with "h."
  const char* hf_suffix;  // after "transformer." (and "h.<i>." when stacked)
  bool transposed;
};

// In HF's order. Layer tensors keep GPT-2's own names in both projects, so the
// suffix is the srkit name without "h.".
constexpr Rule kRules[] = {
    {"wte", "wte.weight", false},
    {"wpe", "wpe.weight", false},
    {"h.ln_1.weight", "ln_1.weight", false},
    {"h.ln_1.bias", "ln_1.bias", false},
    {"h.attn.c_attn.weight", "attn.c_attn.weight", true},
    {"h.attn.c_attn.bias", "attn.c_attn.bias", false},
    {"h.attn.c_proj.weight", "attn.c_proj.weight", true},
    {"h.attn.c_proj.bias", "attn.c_proj.bias", false},
    {"h.ln_2.weight", "ln_2.weight", false},
    {"h.ln_2.bias", "ln_2.bias", false},
    {"h.mlp.c_fc.weight", "mlp.c_fc.weight", true},
    {"h.mlp.c_fc.bias", "mlp.c_fc.bias", false},
    {"h.mlp.c_proj.weight", "mlp.c_proj.weight", true},
    {"h.mlp.c_proj.bias", "mlp.c_proj.bias", false},
    {"ln_f.weight", "ln_f.weight", false},
    {"ln_f.bias", "ln_f.bias", false},
};

bool stacked(const Rule& r) { return std::strncmp(r.param, "h.", 2) == 0; }

HfTensor make(const Rule& r, const ParamTensor& p, int layer, const GPTConfig& c) {
  HfTensor t;
  t.param = r.param;
  t.layer = layer;
  t.transposed = r.transposed;
  t.name = std::string(kHfModelPrefix) +
           (layer >= 0 ? "h." + std::to_string(layer) + "." : std::string()) + r.hf_suffix;
  t.shape.assign(p.shape.begin() + (layer >= 0 ? 1 : 0), p.shape.end());
  if (r.transposed) std::reverse(t.shape.begin(), t.shape.end());
  if (std::strcmp(r.param, "wte") == 0) t.shape[0] = c.vocab_size;  // the real rows only
  return t;
}

// Row-major [rows, cols] -> [cols, rows] in 32 x 32 tiles (the matrices are up
// to 3072 wide: a plain column walk would miss the cache on every element).
template <typename T>
void transpose(const T* in, T* out, size_t rows, size_t cols) {
  constexpr size_t kTile = 32;
  for (size_t r0 = 0; r0 < rows; r0 += kTile) {
    for (size_t c0 = 0; c0 < cols; c0 += kTile) {
      const size_t r1 = std::min(rows, r0 + kTile), c1 = std::min(cols, c0 + kTile);
      for (size_t r = r0; r < r1; ++r) {
        for (size_t c = c0; c < c1; ++c) out[c * rows + r] = in[r * cols + c];
      }
    }
  }
}

void transpose_elements(const void* in, void* out, size_t rows, size_t cols, size_t elem_size) {
  if (elem_size == 2) {
    transpose(static_cast<const uint16_t*>(in), static_cast<uint16_t*>(out), rows, cols);
  } else if (elem_size == 4) {
    transpose(static_cast<const uint32_t*>(in), static_cast<uint32_t*>(out), rows, cols);
  } else {
    throw std::invalid_argument("hf_gpt2: element size " + std::to_string(elem_size) +
                                " (expected 2 or 4)");
  }
}

// Element offset in the flat buffer of the srkit slice t lives in.
size_t slice_offset(const HfTensor& t, const ParamLayout& layout) {
  const ParamTensor& p = layout.get(t.param);
  if (t.layer < 0) return p.offset;
  return p.offset + size_t(t.layer) * (p.count / size_t(p.shape[0]));
}

}  // namespace

size_t HfTensor::count() const {
  size_t n = 1;
  for (int64_t d : shape) n *= size_t(d);
  return n;
}

std::vector<HfTensor> hf_gpt2_tensors(const GPTConfig& c) {
  const ParamLayout layout(c);
  std::vector<HfTensor> out;
  bool layers_done = false;
  for (const Rule& r : kRules) {
    if (!stacked(r)) {
      out.push_back(make(r, layout.get(r.param), -1, c));
      continue;
    }
    if (layers_done) continue;
    // All layer tensors at once, layer by layer, as HF orders them.
    for (int l = 0; l < c.num_layers; ++l) {
      for (const Rule& s : kRules) {
        if (stacked(s)) out.push_back(make(s, layout.get(s.param), l, c));
      }
    }
    layers_done = true;
  }
  if (std::size(kRules) != layout.tensors().size()) {
    throw std::logic_error("hf_gpt2: the name table does not cover every parameter tensor");
  }
  return out;
}

uint64_t hf_gpt2_tensor_count(const GPTConfig& c) {
  uint64_t count = 0;
  for (const Rule& r : kRules) count += stacked(r) ? uint64_t(c.num_layers) : 1;
  return count;
}

std::string hf_bare_name(const HfTensor& t) { return t.name.substr(std::strlen(kHfModelPrefix)); }

bool is_hf_gpt2_buffer(const std::string& name) {
  // [transformer.]h.<digits>.attn.(bias|masked_bias), matched by hand: <regex>
  // costs more to compile than the rest of this file.
  std::string_view rest = name;
  if (rest.starts_with("transformer.")) rest.remove_prefix(std::strlen("transformer."));
  if (!rest.starts_with("h.")) return false;
  rest.remove_prefix(2);
  size_t digits = 0;
  while (digits < rest.size() && rest[digits] >= '0' && rest[digits] <= '9') ++digits;
  if (digits == 0) return false;
  rest.remove_prefix(digits);
  return rest == ".attn.bias" || rest == ".attn.masked_bias";
}

void hf_tensor_from_flat(const HfTensor& t, const ParamLayout& layout, const void* flat, void* hf,
                         size_t elem_size) {
  const char* src = static_cast<const char*>(flat) + slice_offset(t, layout) * elem_size;
  if (t.transposed) {  // srkit [out, in] = [shape[1], shape[0]]
    transpose_elements(src, hf, size_t(t.shape[1]), size_t(t.shape[0]), elem_size);
  } else {
    std::memcpy(hf, src, t.count() * elem_size);
  }
}

void hf_tensor_to_flat(const HfTensor& t, const ParamLayout& layout, const void* hf, void* flat,
                       size_t elem_size) {
  char* dst = static_cast<char*>(flat) + slice_offset(t, layout) * elem_size;
  if (t.transposed) {
    transpose_elements(hf, dst, size_t(t.shape[0]), size_t(t.shape[1]), elem_size);
  } else {
    std::memcpy(dst, hf, t.count() * elem_size);
  }
}

}  // namespace srkit

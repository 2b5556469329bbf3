#include "lib/model/gpt_config.h"

#include <stdexcept>

#include "lib/model/param_layout.h"

namespace srkit {

void GPTConfig::validate() const {
  auto require = [](bool ok, const std::string& what) {
    if (!ok) throw std::invalid_argument("model: " + what);
  };
  require(num_layers >= 1, "layers must be >= 1 (got " + std::to_string(num_layers) + ")");
  require(channels >= 1, "channels must be >= 1 (got " + std::to_string(channels) + ")");
  require(num_heads >= 1 && channels % num_heads == 0, "heads must divide channels (channels " +
                                                           std::to_string(channels) + ", heads " +
                                                           std::to_string(num_heads) + ")");
  require(vocab_size >= 2 && vocab_size <= 65536,
          "vocab must be in [2, 65536] (got " + std::to_string(vocab_size) + ")");
  require(max_seq_len >= 1, "max sequence length must be >= 1");
}

bool GPTConfig::same_shape(const GPTConfig& o) const {
  return num_layers == o.num_layers && channels == o.channels && num_heads == o.num_heads &&
         max_seq_len == o.max_seq_len && vocab_size == o.vocab_size;
}

std::string GPTConfig::describe() const {
  const double params = double(ParamLayout(*this).num_params());
  char buf[256];
  std::snprintf(buf, sizeof buf, "%s: L=%d C=%d NH=%d T=%d V=%d (%.2fM params)", name.c_str(),
                num_layers, channels, num_heads, max_seq_len, vocab_size, params / 1e6);
  return buf;
}

namespace {
struct Preset {
  const char* name;
  int layers, channels, heads, seq, vocab;
};
constexpr Preset kPresets[] = {
    {"tiny", 2, 64, 4, 64, 256},
    {"d4", 4, 256, 4, 256, 256},
    {"d6", 6, 384, 6, 256, 256},
    {"gpt2-124m", 12, 768, 12, 1024, 50257},
    {"gpt2-350m", 24, 1024, 16, 1024, 50257},
    {"gpt2-774m", 36, 1280, 20, 1024, 50257},
    {"gpt2-1.5b", 48, 1600, 25, 1024, 50257},
    {"neo-1.3b", 24, 2048, 16, 2048, 50257},
    {"neo-2.7b", 32, 2560, 20, 2048, 50257},
    {"neo-6.7b", 32, 4096, 32, 2048, 50257},
};
}  // namespace

const std::vector<std::string>& gpt_preset_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> v;
    for (const Preset& p : kPresets) v.emplace_back(p.name);
    return v;
  }();
  return names;
}

GPTConfig gpt_preset(const std::string& name) {
  for (const Preset& p : kPresets) {
    if (name == p.name) {
      GPTConfig c;
      c.name = p.name;
      c.num_layers = p.layers;
      c.channels = p.channels;
      c.num_heads = p.heads;
      c.max_seq_len = p.seq;
      c.vocab_size = p.vocab;
      return c;
    }
  }
  std::string known;
  for (const Preset& p : kPresets) known += std::string(known.empty() ? "" : ", ") + p.name;
  throw std::invalid_argument("--model: unknown preset '" + name + "' (known: " + known + ")");
}

}  // namespace srkit

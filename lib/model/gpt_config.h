// GPT-2-style model shapes: named presets and their derived sizes.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace srkit {

struct GPTConfig {
  std::string name = "custom";
  int max_seq_len = 256;
  int vocab_size = 256;
  int num_layers = 4;
  int num_heads = 4;
  int channels = 256;

  // Vocabulary padded to a multiple of 128 (GEMM-friendly); padding logits are
  // never predicted (the loss and sampling see only the first vocab_size).
  int padded_vocab_size() const { return (vocab_size + 127) / 128 * 128; }
  // Throws std::invalid_argument naming the bad field.
  void validate() const;
  // The same layers, channels, heads, sequence length and vocabulary (names aside).
  bool same_shape(const GPTConfig& other) const;
  std::string describe() const;  // "d4: L=4 C=256 NH=4 T=256 V=256 (3.3M params)"
};

// Presets: tiny (tests), d4, d6 (CPU-sized, byte vocab), gpt2-124m, gpt2-350m,
// gpt2-774m, gpt2-1.5b (GPT-2 vocab 50257, T=1024), neo-1.3b, neo-2.7b,
// neo-6.7b (GPT-Neo-like shapes, T=2048). Throws on an unknown name.
GPTConfig gpt_preset(const std::string& name);
const std::vector<std::string>& gpt_preset_names();

}  // namespace srkit

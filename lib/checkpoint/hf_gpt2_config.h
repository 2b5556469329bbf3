// config.json of a Hugging Face GPT-2 folder (transformers' GPT2Config) and
// srkit's GPTConfig: what sr-export writes and what sr-train --init-from
// accepts. The folder layout and the tensor names are in hf_gpt2_names.h.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "kernels/common/dtype.h"
#include "lib/model/gpt_config.h"

namespace srkit {

constexpr const char* kHfConfigFile = "config.json";
constexpr const char* kHfWeightsFile = "model.safetensors";

// DIR/config.json and DIR/model.safetensors.
std::string hf_config_path(const std::string& dir);
std::string hf_weights_path(const std::string& dir);

// The end-of-text token written as bos_token_id and eos_token_id: GPT-2's
// <|endoftext|> (50256) for its 50257-token vocabulary; none (null in the
// JSON) for other vocabularies, since srkit's byte-level one has no such token.
std::optional<int> hf_gpt2_end_of_text(int vocab_size);

// The config.json of a model whose tensors are stored as `dtype`: GPT2Config's
// keys, with the shape (vocab_size is the real vocabulary, not the padded one),
// the math srkit computes (tanh GELU "gelu_new", LayerNorm epsilon 1e-5, tied
// embeddings) and dropout 0.
nlohmann::ordered_json hf_gpt2_config_json(const GPTConfig& config, DType dtype);

// Parses DIR/config.json into a model shape named after the folder. Throws
// std::runtime_error naming the file and key when the file is missing or not
// JSON, model_type is not "gpt2", a shape key (n_layer, n_head, n_embd,
// n_positions, vocab_size) is missing or not a positive integer, or a setting
// changes the function srkit computes: activation_function other than the tanh
// GELU ("gelu_new", "gelu_pytorch_tanh"), layer_norm_epsilon other than 1e-5,
// n_inner other than null or 4 n_embd, tie_word_embeddings false,
// scale_attn_weights false, scale_attn_by_inverse_layer_idx or
// add_cross_attention true.
GPTConfig read_hf_gpt2_config(const std::string& dir);

}  // namespace srkit

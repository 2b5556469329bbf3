#include "lib/checkpoint/hf_gpt2_config.h"

#include <filesystem>
#include <stdexcept>

#include "kernels/common/math.h"
#include "lib/util/json_text.h"
#include "lib/util/regular_file.h"

namespace srkit {
namespace {

namespace fs = std::filesystem;

// GPT-2's vocabulary and its end-of-text token.
constexpr int kGpt2Vocab = 50257;
constexpr int kGpt2EndOfText = 50256;
// The epsilon as config.json spells it (a float's double value would print as
// 9.99999974737875e-06); it must be the one the LayerNorm kernels use.
constexpr double kConfigLayerNormEps = 1e-5;
static_assert(float(kConfigLayerNormEps) == kLayerNormEps);

std::runtime_error config_error(const std::string& path, const std::string& what) {
  return std::runtime_error(path + ": " + what);
}

int positive_int(const nlohmann::json& j, const std::string& path, const char* key) {
  const auto it = j.find(key);
  if (it == j.end()) throw config_error(path, std::string("missing \"") + key + "\"");
  if (!it->is_number_integer() || it->get<int64_t>() < 1 || it->get<int64_t>() > (1 << 30)) {
    throw config_error(
        path, std::string("\"") + key + "\" is " + it->dump() + ", expected a positive integer");
  }
  return it->get<int>();
}

// A boolean setting that, when present, must have the value srkit computes with.
void require_bool(const nlohmann::json& j, const std::string& path, const char* key, bool want,
                  const char* why) {
  const auto it = j.find(key);
  if (it == j.end() || it->is_null()) return;
  if (!it->is_boolean() || it->get<bool>() != want) {
    throw config_error(path, std::string("\"") + key + "\" is " + it->dump() + ", srkit needs " +
                                 (want ? "true" : "false") + " (" + why + ")");
  }
}

// The folder's own name ("gpt2" for .../gpt2/ or .../gpt2), for messages and tables.
std::string folder_name(const std::string& dir) {
  fs::path p = fs::path(dir).lexically_normal();
  if (p.filename().empty()) p = p.parent_path();
  const std::string name = p.filename().string();
  return name.empty() || name == "." ? "init-from" : name;
}

}  // namespace

std::string hf_config_path(const std::string& dir) {
  return (fs::path(dir) / kHfConfigFile).string();
}

std::string hf_weights_path(const std::string& dir) {
  return (fs::path(dir) / kHfWeightsFile).string();
}

std::optional<int> hf_gpt2_end_of_text(int vocab_size) {
  if (vocab_size == kGpt2Vocab) return kGpt2EndOfText;
  return std::nullopt;
}

nlohmann::ordered_json hf_gpt2_config_json(const GPTConfig& c, DType dtype) {
  const std::optional<int> eot = hf_gpt2_end_of_text(c.vocab_size);
  const nlohmann::ordered_json token = eot ? nlohmann::ordered_json(*eot) : nullptr;
  nlohmann::ordered_json j;
  j["architectures"] = nlohmann::ordered_json::array({"GPT2LMHeadModel"});
  j["model_type"] = "gpt2";
  j["vocab_size"] = c.vocab_size;
  j["n_positions"] = c.max_seq_len;
  j["n_ctx"] = c.max_seq_len;
  j["n_embd"] = c.channels;
  j["n_layer"] = c.num_layers;
  j["n_head"] = c.num_heads;
  j["n_inner"] = nullptr;  // 4 n_embd
  j["activation_function"] = "gelu_new";
  j["layer_norm_epsilon"] = kConfigLayerNormEps;
  j["resid_pdrop"] = 0.0;
  j["embd_pdrop"] = 0.0;
  j["attn_pdrop"] = 0.0;
  j["initializer_range"] = 0.02;
  j["scale_attn_weights"] = true;
  j["scale_attn_by_inverse_layer_idx"] = false;
  j["reorder_and_upcast_attn"] = false;
  j["summary_type"] = "cls_index";
  j["summary_use_proj"] = true;
  j["summary_activation"] = nullptr;
  j["summary_proj_to_labels"] = true;
  j["summary_first_dropout"] = 0.1;
  j["tie_word_embeddings"] = true;
  j["use_cache"] = true;
  j["bos_token_id"] = token;
  j["eos_token_id"] = token;
  j["torch_dtype"] = dtype == DType::kF32 ? "float32" : "bfloat16";
  return j;
}

GPTConfig read_hf_gpt2_config(const std::string& dir) {
  const std::string path = hf_config_path(dir);
  std::error_code ec;
  if (!fs::exists(path, ec) && !fs::is_symlink(path, ec)) {
    throw config_error(path, fs::is_directory(dir) ? "missing (a Hugging Face GPT-2 folder holds "
                                                     "config.json and model.safetensors)"
                                                   : "cannot open: " + dir + " is not a directory");
  }
  // A regular file only: a FIFO planted here would block open() forever.
  const std::string text = RegularFile(path, "config").read_all();
  nlohmann::json j;
  try {
    j = parse_json_text(text);
  } catch (const std::invalid_argument& e) {
    throw config_error(path, e.what());
  }
  if (!j.is_object()) throw config_error(path, "not a JSON object");
  const auto type = j.find("model_type");
  if (type == j.end() || *type != "gpt2") {
    throw config_error(path, "\"model_type\" is " + (type == j.end() ? "missing" : type->dump()) +
                                 ", expected \"gpt2\"");
  }
  GPTConfig c;
  c.name = folder_name(dir);
  c.num_layers = positive_int(j, path, "n_layer");
  c.num_heads = positive_int(j, path, "n_head");
  c.channels = positive_int(j, path, "n_embd");
  c.max_seq_len = positive_int(j, path, "n_positions");
  c.vocab_size = positive_int(j, path, "vocab_size");

  if (const auto act = j.find("activation_function"); act != j.end()) {
    if (*act != "gelu_new" && *act != "gelu_pytorch_tanh") {
      throw config_error(path, "\"activation_function\" is " + act->dump() +
                                   ", srkit computes GPT-2's tanh GELU (\"gelu_new\")");
    }
  }
  if (const auto eps = j.find("layer_norm_epsilon"); eps != j.end()) {
    if (!eps->is_number() || float(eps->get<double>()) != kLayerNormEps) {
      throw config_error(
          path, "\"layer_norm_epsilon\" is " + eps->dump() + ", srkit's LayerNorm uses 1e-05");
    }
  }
  if (const auto inner = j.find("n_inner"); inner != j.end() && !inner->is_null()) {
    if (!inner->is_number_integer() || inner->get<int64_t>() != 4 * int64_t(c.channels)) {
      throw config_error(path, "\"n_inner\" is " + inner->dump() + ", srkit's MLP is 4 n_embd = " +
                                   std::to_string(4 * int64_t(c.channels)));
    }
  }
  require_bool(j, path, "tie_word_embeddings", true, "the classifier is the token embedding");
  require_bool(j, path, "scale_attn_weights", true, "attention scores are scaled by 1/sqrt(d)");
  require_bool(j, path, "scale_attn_by_inverse_layer_idx", false, "no per-layer scaling");
  require_bool(j, path, "add_cross_attention", false, "a decoder without cross-attention");
  try {
    c.validate();
  } catch (const std::invalid_argument& e) {
    throw config_error(path, e.what());
  }
  return c;
}

}  // namespace srkit

#include "lib/checkpoint/hf_gpt2.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <set>
#include <stdexcept>

#include "lib/checkpoint/float_tensors.h"
#include "lib/checkpoint/hf_gpt2_config.h"
#include "lib/checkpoint/hf_gpt2_names.h"
#include "lib/checkpoint/safetensors.h"
#include "lib/checkpoint/value_check.h"
#include "lib/model/param_layout.h"
#include "lib/util/atomic_file.h"

namespace srkit {
namespace {

namespace fs = std::filesystem;

std::runtime_error weights_error(const std::string& path, const std::string& what) {
  return std::runtime_error(path + ": " + what);
}

// The safetensors file of DIR, with a pointed message for the layouts srkit does not read.
std::string weights_file(const std::string& dir) {
  const std::string path = hf_weights_path(dir);
  if (fs::exists(path)) return path;
  if (fs::exists(fs::path(dir) / "model.safetensors.index.json")) {
    throw weights_error(path,
                        "missing; the folder holds a sharded checkpoint "
                        "(model.safetensors.index.json), which srkit does not read");
  }
  if (fs::exists(fs::path(dir) / "pytorch_model.bin")) {
    throw weights_error(path,
                        "missing; the folder holds only pytorch_model.bin (a pickle), "
                        "which srkit does not read");
  }
  throw weights_error(path, "missing");
}

// Which of "transformer.X" and "X" the file holds. `wanted_by` says which
// model asks for the tensor, for the message when neither is there.
std::string stored_name(const SafetensorsReader& r, const HfTensor& t,
                        const std::string& wanted_by) {
  const std::string bare = hf_bare_name(t);
  const bool with = r.has(t.name), without = r.has(bare);
  if (with && without) {
    throw weights_error(r.path(), "holds both '" + t.name + "' and '" + bare + "'");
  }
  if (!with && !without) {
    throw weights_error(r.path(), "missing tensor '" + t.name + "' (or '" + bare + "') of shape " +
                                      shape_string(t.shape) + " " + wanted_by);
  }
  return with ? t.name : bare;
}

// The stored name of t, checked against t's shape and a float dtype.
std::string checked_tensor(const SafetensorsReader& r, const HfTensor& t,
                           const std::string& wanted_by) {
  const std::string name = stored_name(r, t, wanted_by);
  const SafetensorsReader::Info info = r.info(name);
  if (info.shape != t.shape) {
    throw weights_error(r.path(), "tensor '" + name + "' has shape " + shape_string(info.shape) +
                                      ", expected " + shape_string(t.shape) + " " + wanted_by);
  }
  if (!is_convertible_float_dtype(info.dtype)) {
    throw weights_error(
        r.path(), "tensor '" + name + "' has dtype " + info.dtype + ", expected F32, F16 or BF16");
  }
  return name;
}

std::string wanted_by(const std::string& dir, const GPTConfig& config) {
  return "for " + hf_config_path(dir) + " (" + config.describe() + ")";
}

// The model whose tensors are looked up in the file: `config` itself, or, when
// config.json asks for more tensors than the file holds (n_layer 2^30), the
// same model cut to one layer more than the file could hold, so that listing
// the expected names (12 per layer) stays cheap and the first missing one is
// still found and named. Shapes do not depend on the layer count.
GPTConfig listed_config(const SafetensorsReader& r, const GPTConfig& config) {
  const uint64_t held = r.names().size();
  if (hf_gpt2_tensor_count(config) <= held) return config;
  GPTConfig cut = config;
  cut.num_layers = int(std::min<uint64_t>(uint64_t(config.num_layers), held + 1));
  return cut;
}

}  // namespace

void check_hf_gpt2_weights(const std::string& dir, const GPTConfig& config) {
  const SafetensorsReader r(weights_file(dir));
  const std::string asked = wanted_by(dir, config);
  for (const HfTensor& t : hf_gpt2_tensors(listed_config(r, config))) checked_tensor(r, t, asked);
}

void save_hf_gpt2(const std::string& dir, const GPTConfig& config, const void* weights,
                  DType weights_dtype, DType out_dtype) {
  const ParamLayout layout(config);
  const size_t es = dtype_size(out_dtype);
  // The whole image in the output dtype first, so every tensor is a plain copy.
  std::vector<char> flat(layout.total_size() * es);
  convert_float_elements(weights, safetensors_dtype_of(weights_dtype), flat.data(), out_dtype,
                         layout.total_size());
  const std::vector<HfTensor> tensors = hf_gpt2_tensors(config);
  std::vector<std::vector<char>> data(tensors.size());
  std::vector<TensorRef> refs;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const HfTensor& t = tensors[i];
    data[i].resize(t.count() * es);
    hf_tensor_from_flat(t, layout, flat.data(), data[i].data(), es);
    refs.push_back(TensorRef{t.name, safetensors_dtype_of(out_dtype), t.shape, data[i].data(),
                             data[i].size()});
  }
  // Both files at once (lib/util/atomic_file.h): a reader never finds new
  // weights beside an old or missing config.json.
  AtomicDirWriter folder(dir);
  // transformers refuses a safetensors file without format metadata.
  save_safetensors(folder.file(kHfWeightsFile), refs, {{"format", "pt"}});
  const std::string json = hf_gpt2_config_json(config, out_dtype).dump(2) + "\n";
  write_file_atomic(folder.file(kHfConfigFile), json.data(), json.size());
  folder.commit();
}

std::vector<char> read_hf_gpt2_weights(const std::string& dir, const GPTConfig& config,
                                       DType dtype) {
  const ParamLayout layout(config);
  const size_t es = dtype_size(dtype);
  const SafetensorsReader r(weights_file(dir));
  std::vector<char> flat(layout.total_size() * es, 0);
  std::vector<char> buf;
  std::set<std::string> used;
  const std::vector<HfTensor> tensors = hf_gpt2_tensors(config);
  const std::string asked = wanted_by(dir, config);
  for (const HfTensor& t : tensors) {
    const std::string name = checked_tensor(r, t, asked);
    buf.resize(t.count() * es);
    r.read_as(name, dtype, buf.data(), t.count());
    // A NaN or an Inf would start a run that stops at its first step, far from the cause.
    const BadValue bad = first_bad_value(dtype, buf.data(), t.count(), false);
    if (bad.index < t.count()) {
      throw weights_error(r.path(), "tensor '" + name + "' element " + std::to_string(bad.index) +
                                        " is NaN or infinite (as " + dtype_name(dtype) +
                                        "); srkit starts only from finite weights");
    }
    hf_tensor_to_flat(t, layout, buf.data(), flat.data(), es);
    used.insert(name);
  }
  for (const std::string& name : r.names()) {
    if (used.count(name) || is_hf_gpt2_buffer(name)) continue;
    if (name != kHfTiedHead) {
      throw weights_error(r.path(), "unexpected tensor '" + name + "' (not a parameter of GPT-2 " +
                                        config.describe() + ")");
    }
    // A stored head is accepted only as the tied copy of wte it must be.
    const HfTensor& wte = tensors.front();
    const SafetensorsReader::Info info = r.info(name);
    if (info.shape != wte.shape || !is_convertible_float_dtype(info.dtype)) {
      throw weights_error(r.path(), "tensor '" + name + "' is " + info.dtype + " " +
                                        shape_string(info.shape) + ", expected the tied copy of " +
                                        wte.name + " " + shape_string(wte.shape));
    }
    // Compared as stored, widened to f32 (exact for every accepted dtype): a
    // difference must not hide behind the rounding into the run's dtype.
    std::vector<float> head(wte.count()), embedding(wte.count());
    r.read_as(name, DType::kF32, head.data(), head.size());
    r.read_as(stored_name(r, wte, asked), DType::kF32, embedding.data(), embedding.size());
    if (std::memcmp(head.data(), embedding.data(), head.size() * sizeof(float)) != 0) {
      throw weights_error(r.path(), "tensor '" + name + "' differs from " + wte.name +
                                        "; srkit's classifier is tied to the token embedding");
    }
  }
  return flat;
}

void load_hf_gpt2(const std::string& dir, GPT& model) {
  const GPTConfig have = read_hf_gpt2_config(dir);
  if (!have.same_shape(model.config())) {
    throw std::runtime_error(hf_config_path(dir) + " describes " + have.describe() +
                             ", the model is " + model.config().describe());
  }
  const std::vector<char> flat = read_hf_gpt2_weights(dir, model.config(), model.dtype());
  model.backend().copy_to_device(model.weights(), flat.data(), flat.size());
}

}  // namespace srkit

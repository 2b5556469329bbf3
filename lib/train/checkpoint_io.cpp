#include "lib/train/checkpoint_io.h"

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <stdexcept>
#include <vector>

#include "lib/checkpoint/checkpoint_dir.h"
#include "lib/checkpoint/float_tensors.h"
#include "lib/checkpoint/safetensors.h"

namespace srkit {
namespace {

constexpr const char* kFormat = "srkit-checkpoint-1";

std::string st_dtype(DType d) { return safetensors_dtype_of(d); }

nlohmann::json model_json(const GPTConfig& c) {
  return {{"layers", c.num_layers},
          {"channels", c.channels},
          {"heads", c.num_heads},
          {"vocab", c.vocab_size},
          {"max_seq_len", c.max_seq_len}};
}

GPTConfig model_from_json(const std::string& path, const std::string& text) {
  try {
    const nlohmann::json j = nlohmann::json::parse(text);
    GPTConfig c;
    c.num_layers = j.at("layers").get<int>();
    c.channels = j.at("channels").get<int>();
    c.num_heads = j.at("heads").get<int>();
    c.vocab_size = j.at("vocab").get<int>();
    c.max_seq_len = j.at("max_seq_len").get<int>();
    c.validate();
    return c;
  } catch (const std::exception& e) {
    throw std::runtime_error(path + ": malformed model metadata '" + text + "' (" + e.what() + ")");
  }
}

// Every weight tensor of the file into `flat`, a host image of the flat buffer
// of `layout` in dtype; each must have that dtype and its layout shape.
void read_weights(const SafetensorsReader& reader, const ParamLayout& layout, DType dtype,
                  char* flat) {
  const size_t es = dtype_size(dtype);
  for (const ParamTensor& t : layout.tensors()) {
    const SafetensorsReader::Info ti = reader.info(t.name);
    if (ti.dtype != st_dtype(dtype) || ti.shape != t.shape) {
      throw std::runtime_error(reader.path() + ": tensor " + t.name + " has dtype " + ti.dtype +
                               " and a different shape than this model expects");
    }
    reader.read(t.name, flat + t.offset * es, t.count * es);
  }
}

std::vector<char> device_to_host(Backend& backend, const void* src, size_t bytes) {
  std::vector<char> host(bytes);
  backend.copy_to_host(host.data(), src, bytes);
  return host;
}

}  // namespace

std::vector<HostStateBuffer> optimizer_state_to_host(const Optimizer& optimizer) {
  Backend& backend = optimizer.backend();
  std::vector<HostStateBuffer> out;
  for (const Optimizer::StateBuffer& s : optimizer.state_buffers()) {
    out.push_back({s.name, s.dtype, device_to_host(backend, s.data, s.bytes)});
  }
  return out;
}

void save_checkpoint(const std::string& path, GPT& model, const std::vector<HostStateBuffer>& state,
                     const CheckpointInfo& info) {
  Backend& backend = model.backend();
  const size_t es = dtype_size(model.dtype());
  const size_t total = model.layout().total_size();
  const std::vector<char> weights = device_to_host(backend, model.weights(), total * es);
  std::vector<TensorRef> tensors;
  for (const ParamTensor& t : model.layout().tensors()) {
    tensors.push_back(TensorRef{t.name, st_dtype(model.dtype()), t.shape,
                                weights.data() + t.offset * es, t.count * es});
  }
  for (const HostStateBuffer& s : state) {
    if (s.bytes.size() != total * safetensors_dtype_size(s.dtype)) {
      throw std::logic_error("save_checkpoint: optimizer state " + s.name +
                             " does not cover the whole flat buffer");
    }
    tensors.push_back(TensorRef{
        "optimizer." + s.name, s.dtype, {int64_t(total)}, s.bytes.data(), s.bytes.size()});
  }
  std::map<std::string, std::string> meta;
  meta["format"] = kFormat;
  meta["step"] = std::to_string(info.step);
  meta["data_cursor"] = std::to_string(info.data_cursor);
  meta["seed"] = std::to_string(info.seed);
  meta["strategy"] = info.strategy;
  meta["model"] = model_json(model.config()).dump();
  meta["config"] = info.config.dump();
  meta["optimizer_range"] = "0:" + std::to_string(total);
  meta["world_size"] = std::to_string(info.world_size);
  std::filesystem::create_directories(std::filesystem::path(path).parent_path().empty()
                                          ? std::filesystem::path(".")
                                          : std::filesystem::path(path).parent_path());
  save_safetensors(path, tensors, meta);
}

void save_checkpoint(const std::string& path, GPT& model, const Optimizer& optimizer,
                     const CheckpointInfo& info) {
  if (optimizer.begin() != 0 || optimizer.end() != model.layout().total_size()) {
    throw std::logic_error("save_checkpoint: the optimizer holds a shard; gather the state first");
  }
  save_checkpoint(path, model, optimizer_state_to_host(optimizer), info);
}

CheckpointInfo read_checkpoint_info(const std::string& path) {
  SafetensorsReader reader(path);
  const auto& meta = reader.metadata();
  auto field = [&](const char* key) {
    auto it = meta.find(key);
    if (it == meta.end()) {
      throw std::runtime_error(path + ": not an srkit checkpoint (metadata lacks '" + key + "')");
    }
    return it->second;
  };
  if (field("format") != kFormat) {
    throw std::runtime_error(path + ": unsupported checkpoint format '" + field("format") + "'");
  }
  CheckpointInfo info;
  try {
    info.step = std::stoull(field("step"));
    info.data_cursor = std::stoull(field("data_cursor"));
    info.seed = std::stoull(field("seed"));
    info.config = nlohmann::json::parse(field("config"));
  } catch (const std::logic_error& e) {
    throw std::runtime_error(path + ": malformed checkpoint metadata (" + e.what() + ")");
  }
  info.strategy = field("strategy");
  if (meta.count("world_size")) info.world_size = std::atoi(meta.at("world_size").c_str());
  return info;
}

CheckpointWeights read_checkpoint_weights(const std::string& path) {
  CheckpointWeights w;
  w.info = read_checkpoint_info(path);
  SafetensorsReader reader(path);
  const auto model = reader.metadata().find("model");
  if (model == reader.metadata().end()) {
    throw std::runtime_error(path + ": not an srkit checkpoint (metadata lacks 'model')");
  }
  w.model = model_from_json(path, model->second);
  const std::string preset = w.info.config.value("model", std::string());
  if (!preset.empty()) w.model.name = preset;
  const ParamLayout layout(w.model);
  const std::string dtype = reader.info(layout.tensors().front().name).dtype;
  if (dtype != "F32" && dtype != "BF16") {
    throw std::runtime_error(path + ": weights have dtype " + dtype + ", expected F32 or BF16");
  }
  w.dtype = dtype == "F32" ? DType::kF32 : DType::kBF16;
  w.flat.assign(layout.total_size() * dtype_size(w.dtype), 0);
  read_weights(reader, layout, w.dtype, w.flat.data());
  return w;
}

CheckpointInfo load_checkpoint(const std::string& path, GPT& model, Optimizer& optimizer) {
  CheckpointInfo info = read_checkpoint_info(path);
  SafetensorsReader reader(path);
  const std::string want = model_json(model.config()).dump();
  const std::string have = reader.metadata().at("model");
  if (have != want) {
    throw std::runtime_error(path + ": checkpoint is for model " + have + ", this run has " + want);
  }
  if (info.strategy != optimizer.strategy().name) {
    throw std::runtime_error(path + ": checkpoint strategy is '" + info.strategy +
                             "', this run uses '" + optimizer.strategy().name + "'");
  }
  Backend& backend = model.backend();
  std::vector<char> weights(model.weight_bytes(), 0);
  read_weights(reader, model.layout(), model.dtype(), weights.data());
  backend.copy_to_device(model.weights(), weights.data(), weights.size());
  // The file holds each state buffer for the whole flat buffer; this run's
  // optimizer takes its range of it.
  const std::vector<int64_t> whole{int64_t(model.layout().total_size())};
  for (const Optimizer::StateBuffer& s : optimizer.state_buffers()) {
    const std::string name = "optimizer." + s.name;
    if (!reader.has(name)) throw std::runtime_error(path + ": missing tensor " + name);
    const SafetensorsReader::Info ti = reader.info(name);
    if (ti.dtype != s.dtype || ti.shape != whole) {
      throw std::runtime_error(path + ": tensor " + name + " does not match this run's optimizer");
    }
    std::vector<char> host(ti.nbytes);
    reader.read(name, host.data(), host.size());
    const size_t es = safetensors_dtype_size(s.dtype);
    backend.copy_to_device(s.data, host.data() + optimizer.begin() * es, s.bytes);
  }
  return info;
}

std::string resolve_checkpoint(const std::string& file_or_dir) {
  namespace fs = std::filesystem;
  if (!fs::exists(file_or_dir)) {
    throw std::runtime_error("--resume: " + file_or_dir + " does not exist");
  }
  if (!fs::is_directory(file_or_dir)) return file_or_dir;
  const std::string latest = latest_checkpoint(file_or_dir);
  if (latest.empty()) {
    throw std::runtime_error("--resume: no ckpt_*.safetensors in directory " + file_or_dir);
  }
  return latest;
}

}  // namespace srkit

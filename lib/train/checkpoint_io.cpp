#include "lib/train/checkpoint_io.h"

#include <filesystem>
#include <stdexcept>
#include <vector>

#include "lib/checkpoint/checkpoint_dir.h"
#include "lib/checkpoint/float_tensors.h"
#include "lib/checkpoint/safetensors.h"
#include "lib/checkpoint/value_check.h"
#include "lib/util/checksum.h"
#include "lib/util/format.h"
#include "lib/util/regular_file.h"

namespace srkit {
namespace {

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

std::vector<char> device_to_host(Backend& backend, const void* src, size_t bytes) {
  std::vector<char> host(bytes);
  backend.copy_to_host(host.data(), src, bytes);
  return host;
}

// A tensor's bytes must hash to the checksum saved with them: a torn or mixed
// file (one run's header, another's bytes) fails here, naming the tensor.
void verify_checksum(const std::string& path, const CheckpointMetadata& meta,
                     const std::string& name, const void* bytes, size_t nbytes) {
  const auto it = meta.checksums.find(name);
  if (it == meta.checksums.end()) {
    throw std::runtime_error(path + ": tensor '" + name + "' has no checksum in the metadata");
  }
  const uint64_t have = checksum_bytes(bytes, nbytes);
  if (have != it->second) {
    throw std::runtime_error(path + ": tensor '" + name + "' does not match its checksum (saved " +
                             checksum_hex(it->second) + ", bytes hash to " + checksum_hex(have) +
                             "): the file is corrupt or was mixed from two writes");
  }
}

// Weights and optimizer state must be finite (v also >= 0). `non_negative`
// is for Adam's second moment.
void verify_values(const std::string& path, const std::string& name, DType dtype, const void* bytes,
                   size_t count, bool non_negative) {
  const BadValue bad = first_bad_value(dtype, bytes, count, non_negative);
  if (bad.index == count) return;
  throw std::runtime_error(path + ": tensor '" + name + "' holds " +
                           (bad.non_finite ? "a NaN or Inf" : "a negative value") +
                           strprintf(" at index %zu", bad.index) +
                           (bad.non_finite ? "" : " (Adam's second moment must be >= 0)"));
}

// The optimizer state buffers whose values are floats, and which of them must
// be non-negative. master_rem16 holds the low bits of fp32 masters: any bits.
bool state_is_float(const std::string& dtype) { return dtype == "F32" || dtype == "BF16"; }
bool state_is_non_negative(const std::string& name) { return name == "adam_v"; }

// Every weight tensor of the file into `flat`, a host image of the flat buffer
// of `layout` in dtype; each must have that dtype and its layout shape, hash to
// its saved checksum and hold finite values.
void read_weights(const SafetensorsReader& reader, const CheckpointMetadata& meta,
                  const ParamLayout& layout, DType dtype, char* flat) {
  const std::string& path = reader.path();
  const size_t es = dtype_size(dtype);
  for (const ParamTensor& t : layout.tensors()) {
    if (!reader.has(t.name)) throw std::runtime_error(path + ": missing tensor " + t.name);
    const SafetensorsReader::Info ti = reader.info(t.name);
    if (ti.dtype != st_dtype(dtype) || ti.shape != t.shape) {
      throw std::runtime_error(path + ": tensor " + t.name + " has dtype " + ti.dtype +
                               " and a different shape than this model expects");
    }
    char* dst = flat + t.offset * es;
    reader.read(t.name, dst, t.count * es);
    verify_checksum(path, meta, t.name, dst, t.count * es);
    verify_values(path, t.name, dtype, dst, t.count, false);
  }
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
  CheckpointMetadata meta;
  meta.info = info;
  meta.model = model_json(model.config());
  meta.optimizer_elements = total;
  for (const HostStateBuffer& s : state) {
    if (s.bytes.size() != total * safetensors_dtype_size(s.dtype)) {
      throw std::logic_error("save_checkpoint: optimizer state " + s.name +
                             " does not cover the whole flat buffer");
    }
    tensors.push_back(TensorRef{
        "optimizer." + s.name, s.dtype, {int64_t(total)}, s.bytes.data(), s.bytes.size()});
  }
  for (const TensorRef& t : tensors) meta.checksums[t.name] = checksum_bytes(t.data, t.nbytes);
  std::filesystem::create_directories(std::filesystem::path(path).parent_path().empty()
                                          ? std::filesystem::path(".")
                                          : std::filesystem::path(path).parent_path());
  save_safetensors(path, tensors, checkpoint_metadata_strings(meta));
}

void save_checkpoint(const std::string& path, GPT& model, const Optimizer& optimizer,
                     const CheckpointInfo& info) {
  if (optimizer.begin() != 0 || optimizer.end() != model.layout().total_size()) {
    throw std::logic_error("save_checkpoint: the optimizer holds a shard; gather the state first");
  }
  save_checkpoint(path, model, optimizer_state_to_host(optimizer), info);
}

CheckpointInfo read_checkpoint_info(const std::string& path) {
  return parse_checkpoint_metadata(SafetensorsReader(path).metadata(), path).info;
}

CheckpointWeights read_checkpoint_weights(const std::string& path) {
  CheckpointWeights w;
  const SafetensorsReader reader(path);
  const CheckpointMetadata meta = parse_checkpoint_metadata(reader.metadata(), path);
  w.info = meta.info;
  w.model = model_from_json(path, meta.model.dump());
  const std::string preset = w.info.config.value("model", std::string());
  if (!preset.empty()) w.model.name = preset;
  const ParamLayout layout(w.model);
  const std::string dtype = reader.info(layout.tensors().front().name).dtype;
  if (dtype != "F32" && dtype != "BF16") {
    throw std::runtime_error(path + ": weights have dtype " + dtype + ", expected F32 or BF16");
  }
  w.dtype = dtype == "F32" ? DType::kF32 : DType::kBF16;
  w.flat.assign(layout.total_size() * dtype_size(w.dtype), 0);
  read_weights(reader, meta, layout, w.dtype, w.flat.data());
  return w;
}

CheckpointInfo load_checkpoint(const std::string& path, GPT& model, Optimizer& optimizer) {
  const SafetensorsReader reader(path);
  const CheckpointMetadata meta = parse_checkpoint_metadata(reader.metadata(), path);
  const nlohmann::json want = model_json(model.config());
  if (meta.model != want) {
    throw std::runtime_error(path + ": checkpoint is for model " + meta.model.dump() +
                             ", this run has " + want.dump());
  }
  if (meta.info.strategy != optimizer.strategy().name) {
    throw std::runtime_error(path + ": checkpoint strategy is '" + printable(meta.info.strategy) +
                             "', this run uses '" + optimizer.strategy().name + "'");
  }
  const size_t total = model.layout().total_size();
  if (meta.optimizer_elements != total) {
    throw std::runtime_error(path + strprintf(": optimizer state covers %llu parameters, this "
                                              "model has %zu",
                                              (unsigned long long)meta.optimizer_elements, total));
  }
  Backend& backend = model.backend();
  std::vector<char> weights(model.weight_bytes(), 0);
  read_weights(reader, meta, model.layout(), model.dtype(), weights.data());
  backend.copy_to_device(model.weights(), weights.data(), weights.size());
  // The file holds each state buffer for the whole flat buffer; this run's
  // optimizer takes its range of it. One buffer at a time, through one host copy.
  const std::vector<int64_t> whole{int64_t(total)};
  std::vector<char> host;
  for (const Optimizer::StateBuffer& s : optimizer.state_buffers()) {
    const std::string name = "optimizer." + s.name;
    if (!reader.has(name)) throw std::runtime_error(path + ": missing tensor " + name);
    const SafetensorsReader::Info ti = reader.info(name);
    if (ti.dtype != s.dtype || ti.shape != whole) {
      throw std::runtime_error(path + ": tensor " + name + " does not match this run's optimizer");
    }
    host.resize(ti.nbytes);
    reader.read(name, host.data(), host.size());
    verify_checksum(path, meta, name, host.data(), host.size());
    if (state_is_float(s.dtype)) {
      verify_values(path, name, s.dtype == "F32" ? DType::kF32 : DType::kBF16, host.data(), total,
                    state_is_non_negative(s.name));
    }
    const size_t state_es = safetensors_dtype_size(s.dtype);
    backend.copy_to_device(s.data, host.data() + optimizer.begin() * state_es, s.bytes);
  }
  return meta.info;
}

std::string resolve_checkpoint(const std::string& file_or_dir) {
  std::error_code ec;
  if (std::filesystem::is_directory(file_or_dir, ec)) {
    const std::string latest = latest_checkpoint(file_or_dir);
    if (latest.empty()) {
      throw std::runtime_error("--resume: no ckpt_*.safetensors in directory " + file_or_dir);
    }
    return latest;
  }
  // Anything but a directory must be a regular file: opening it says what else
  // it is (a FIFO would otherwise block the reader forever) or that it is missing.
  RegularFile(file_or_dir, "--resume");
  return file_or_dir;
}

}  // namespace srkit

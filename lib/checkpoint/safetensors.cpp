#include "lib/checkpoint/safetensors.h"

#include <algorithm>
#include <bit>
#include <nlohmann/json.hpp>
#include <set>
#include <stdexcept>

#include "lib/checkpoint/float_tensors.h"
#include "lib/util/atomic_file.h"
#include "lib/util/format.h"
#include "lib/util/regular_file.h"

namespace srkit {

// Tensors and the header length are stored little-endian and copied as is.
static_assert(std::endian::native == std::endian::little, "safetensors I/O assumes little endian");

namespace {

constexpr const char* kMetadataKey = "__metadata__";
// A corrupt length field must not make us allocate gigabytes; the reference
// implementation uses the same 100 MB ceiling.
constexpr uint64_t kMaxHeaderBytes = 100u << 20;

// Names and keys quoted in `what` come from the file: printable() keeps the
// message one line whatever they hold.
std::runtime_error file_error(const std::string& path, const std::string& what) {
  return std::runtime_error(printable("safetensors file '" + path + "': " + what));
}

// Elements of a shape, or false on overflow.
bool element_count(const std::vector<int64_t>& shape, uint64_t* out) {
  uint64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0 || __builtin_mul_overflow(n, uint64_t(d), &n)) return false;
  }
  *out = n;
  return true;
}

}  // namespace

std::string shape_string(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

namespace {

// A key given twice in one JSON object; depth 1 is the header's own object.
struct DuplicateKey {
  std::string key;
  size_t depth;
};

// nlohmann keeps the last of two equal keys without a word, so a header naming
// one tensor twice would lose a tensor silently. The parser's callback sees
// every key as it is read; one set of seen keys per open object finds repeats.
nlohmann::json parse_header_json(const std::string& text) {
  std::vector<std::set<std::string>> open_objects;
  auto check_keys = [&](int, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
    using Event = nlohmann::json::parse_event_t;
    if (event == Event::object_start) {
      open_objects.emplace_back();
    } else if (event == Event::object_end) {
      open_objects.pop_back();
    } else if (event == Event::key &&
               !open_objects.back().insert(parsed.get<std::string>()).second) {
      throw DuplicateKey{parsed.get<std::string>(), open_objects.size()};
    }
    return true;
  };
  return nlohmann::json::parse(text, check_keys);
}

}  // namespace

size_t safetensors_dtype_size(const std::string& dtype) {
  static const std::map<std::string, size_t> kSizes = {
      {"BOOL", 1}, {"U8", 1},  {"I8", 1},  {"F8_E5M2", 1}, {"F8_E4M3", 1},
      {"I16", 2},  {"U16", 2}, {"F16", 2}, {"BF16", 2},    {"I32", 4},
      {"U32", 4},  {"F32", 4}, {"F64", 8}, {"I64", 8},     {"U64", 8}};
  const auto it = kSizes.find(dtype);
  if (it == kSizes.end()) throw std::invalid_argument("unknown safetensors dtype '" + dtype + "'");
  return it->second;
}

void save_safetensors(const std::string& path, const std::vector<TensorRef>& tensors,
                      const std::map<std::string, std::string>& metadata) {
  // ordered_json keeps metadata first and tensors in layout order, for readers' eyes.
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) header[kMetadataKey] = metadata;
  std::set<std::string> seen;
  uint64_t offset = 0;
  for (const TensorRef& t : tensors) {
    const std::string where = "saving '" + path + "': tensor '" + t.name + "'";
    if (t.name.empty() || t.name == kMetadataKey)
      throw std::invalid_argument(where + ": reserved or empty name");
    if (!seen.insert(t.name).second) throw std::invalid_argument(where + ": duplicate name");
    uint64_t elements = 0;
    if (!element_count(t.shape, &elements))
      throw std::invalid_argument(where + ": bad shape " + shape_string(t.shape));
    size_t elem_size = 0;
    try {
      elem_size = safetensors_dtype_size(t.dtype);
    } catch (const std::invalid_argument& e) {
      throw std::invalid_argument(where + ": " + e.what());
    }
    if (elements * elem_size != t.nbytes) {
      throw std::invalid_argument(where + strprintf(": %zu bytes given, %s %s needs %llu", t.nbytes,
                                                    t.dtype.c_str(), shape_string(t.shape).c_str(),
                                                    (unsigned long long)(elements * elem_size)));
    }
    if (t.nbytes != 0 && t.data == nullptr) throw std::invalid_argument(where + ": null data");
    header[t.name] = {
        {"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {offset, offset + t.nbytes}}};
    offset += t.nbytes;
  }
  std::string json = header.dump();
  json.append((8 - (8 + json.size()) % 8) % 8, ' ');  // the data buffer starts 8-aligned
  const uint64_t header_len = json.size();

  AtomicFileWriter w(path);
  w.write(&header_len, sizeof(header_len));
  w.write(json.data(), json.size());
  for (const TensorRef& t : tensors) {
    if (t.nbytes) w.write(t.data, t.nbytes);
  }
  w.commit();
}

SafetensorsReader::SafetensorsReader(const std::string& path)
    : path_(path), file_(path, "safetensors file") {
  const uint64_t file_size = file_.size();
  if (file_size < 8) {
    throw file_error(path, strprintf("truncated: %llu bytes, shorter than the 8-byte header length",
                                     (unsigned long long)file_size));
  }
  uint64_t header_len = 0;
  file_.read_at(0, &header_len, sizeof(header_len), "the header length");
  if (header_len > file_size - 8 || header_len > kMaxHeaderBytes) {
    throw file_error(
        path, strprintf("header length %llu exceeds the %llu bytes after it "
                        "(truncated or not a safetensors file)",
                        (unsigned long long)header_len, (unsigned long long)(file_size - 8)));
  }
  std::string text(header_len, '\0');
  file_.read_at(8, text.data(), text.size(), "the header");
  data_start_ = 8 + header_len;
  const uint64_t buffer_size = file_size - data_start_;

  nlohmann::json header;
  try {
    header = parse_header_json(text);
  } catch (const nlohmann::json::parse_error& e) {
    throw file_error(path, strprintf("header is not valid JSON (at byte %zu)", e.byte));
  } catch (const nlohmann::json::exception&) {
    throw file_error(path, "header is not valid JSON (a number out of range)");
  } catch (const DuplicateKey& d) {
    const bool tensor_name = d.depth == 1 && d.key != kMetadataKey;
    throw file_error(
        path, (tensor_name ? "tensor name '" : "key '") + d.key + "' appears twice in the header");
  }
  if (!header.is_object()) throw file_error(path, "header is not a JSON object");

  struct Span {
    uint64_t begin, end;
    std::string name;
  };
  std::vector<Span> spans;
  for (const auto& [key, value] : header.items()) {
    if (key == kMetadataKey) {
      if (!value.is_object()) throw file_error(path, "__metadata__ is not an object");
      for (const auto& [mk, mv] : value.items()) {
        if (!mv.is_string())
          throw file_error(path, "metadata value of '" + mk + "' is not a string");
        metadata_[mk] = mv.get<std::string>();
      }
      continue;
    }
    const std::string where = "tensor '" + key + "': ";
    if (!value.is_object()) throw file_error(path, where + "entry is not an object");
    const auto dtype = value.find("dtype");
    const auto shape = value.find("shape");
    const auto offsets = value.find("data_offsets");
    if (dtype == value.end() || !dtype->is_string())
      throw file_error(path, where + "missing string \"dtype\"");
    if (shape == value.end() || !shape->is_array())
      throw file_error(path, where + "missing array \"shape\"");
    if (offsets == value.end() || !offsets->is_array() || offsets->size() != 2 ||
        !(*offsets)[0].is_number_unsigned() || !(*offsets)[1].is_number_unsigned())
      throw file_error(path,
                       where + "\"data_offsets\" is not [begin, end] of non-negative integers");
    Entry e;
    e.info.dtype = dtype->get<std::string>();
    size_t elem_size = 0;
    try {
      elem_size = safetensors_dtype_size(e.info.dtype);
    } catch (const std::invalid_argument& err) {
      throw file_error(path, where + err.what());
    }
    for (const auto& d : *shape) {
      if (!d.is_number_unsigned())
        throw file_error(path, where + "shape has a non-integer or negative entry");
      e.info.shape.push_back(d.get<int64_t>());
    }
    uint64_t elements = 0;
    if (!element_count(e.info.shape, &elements) ||
        __builtin_mul_overflow(elements, uint64_t(elem_size), &elements))
      throw file_error(path, where + "shape " + shape_string(e.info.shape) + " overflows");
    const uint64_t begin = (*offsets)[0].get<uint64_t>(), end = (*offsets)[1].get<uint64_t>();
    if (begin > end || end > buffer_size) {
      throw file_error(path,
                       where + strprintf("data_offsets [%llu, %llu] outside the %llu-byte data "
                                         "buffer (truncated?)",
                                         (unsigned long long)begin, (unsigned long long)end,
                                         (unsigned long long)buffer_size));
    }
    if (end - begin != elements) {
      throw file_error(
          path,
          where + strprintf("%llu bytes but %s %s needs %llu", (unsigned long long)(end - begin),
                            e.info.dtype.c_str(), shape_string(e.info.shape).c_str(),
                            (unsigned long long)elements));
    }
    e.info.nbytes = size_t(elements);
    e.begin = begin;
    tensors_.emplace(key, std::move(e));
    spans.push_back({begin, end, key});
  }

  // The tensors must tile the buffer exactly: a gap could hide foreign data, an
  // overlap would alias two tensors.
  std::sort(spans.begin(), spans.end(), [](const Span& a, const Span& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  uint64_t covered = 0;
  for (const Span& s : spans) {
    if (s.begin < covered)
      throw file_error(path, "tensor '" + s.name + "' overlaps another tensor");
    if (s.begin > covered) {
      throw file_error(path, strprintf("unindexed bytes %llu..%llu before tensor '%s'",
                                       (unsigned long long)covered, (unsigned long long)s.begin,
                                       s.name.c_str()));
    }
    covered = s.end;
  }
  if (covered != buffer_size) {
    throw file_error(path, strprintf("%llu bytes after the last tensor (data buffer %llu, tensors "
                                     "cover %llu)",
                                     (unsigned long long)(buffer_size - covered),
                                     (unsigned long long)buffer_size, (unsigned long long)covered));
  }
}

const SafetensorsReader::Entry& SafetensorsReader::entry(const std::string& name) const {
  const auto it = tensors_.find(name);
  if (it == tensors_.end()) throw file_error(path_, "no tensor named '" + name + "'");
  return it->second;
}

SafetensorsReader::Info SafetensorsReader::info(const std::string& name) const {
  return entry(name).info;
}

void SafetensorsReader::read(const std::string& name, void* dst, size_t nbytes) const {
  const Entry& e = entry(name);
  if (nbytes != e.info.nbytes) {
    throw file_error(path_, strprintf("tensor '%s' has %zu bytes (%s %s), caller expects %zu",
                                      name.c_str(), e.info.nbytes, e.info.dtype.c_str(),
                                      shape_string(e.info.shape).c_str(), nbytes));
  }
  if (nbytes == 0) return;
  file_.read_at(data_start_ + e.begin, dst, nbytes, "tensor '" + name + "'");
}

void SafetensorsReader::read_as(const std::string& name, DType dtype, void* dst,
                                size_t elements) const {
  const Info& info = entry(name).info;
  if (!is_convertible_float_dtype(info.dtype)) {
    throw file_error(
        path_, "tensor '" + name + "' has dtype " + info.dtype + ", expected F32, F16 or BF16");
  }
  const size_t have = info.nbytes / safetensors_dtype_size(info.dtype);
  if (have != elements) {
    throw file_error(
        path_, strprintf("tensor '%s' has %zu elements (%s), caller expects %zu", name.c_str(),
                         have, shape_string(info.shape).c_str(), elements));
  }
  if (info.dtype == safetensors_dtype_of(dtype)) {
    read(name, dst, info.nbytes);
    return;
  }
  std::vector<char> raw(info.nbytes);
  read(name, raw.data(), raw.size());
  convert_float_elements(raw.data(), info.dtype, dst, dtype, elements);
}

std::vector<std::string> SafetensorsReader::names() const {
  std::vector<std::pair<uint64_t, std::string>> order;
  for (const auto& [name, e] : tensors_) order.emplace_back(e.begin, name);
  std::sort(order.begin(), order.end());
  std::vector<std::string> out;
  for (auto& [begin, name] : order) out.push_back(std::move(name));
  return out;
}

}  // namespace srkit

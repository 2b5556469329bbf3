#include "lib/train/checkpoint_metadata.h"

#include <charconv>
#include <climits>
#include <optional>
#include <stdexcept>
#include <string_view>

#include "lib/util/format.h"

namespace srkit {
namespace {

constexpr const char* kFormat = "srkit-checkpoint-2";
constexpr const char* kFormatWithoutChecksums = "srkit-checkpoint-1";

// Digits only: no sign, no spaces, no exponent; at least one digit; fits 64 bits.
std::optional<uint64_t> decimal(std::string_view s) {
  uint64_t value = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
  if (s.empty() || s.find_first_not_of("0123456789") != std::string_view::npos ||
      ec != std::errc() || end != s.data() + s.size())
    return std::nullopt;
  return value;
}

class MetadataParser {
 public:
  MetadataParser(const std::map<std::string, std::string>& meta, const std::string& path)
      : meta_(meta), path_(path) {}

  [[noreturn]] void fail(const std::string& field, const std::string& what) const {
    throw std::runtime_error(printable(path_ + ": checkpoint metadata '" + field + "': " + what));
  }

  const std::string& text(const std::string& field) const {
    const auto it = meta_.find(field);
    if (it == meta_.end()) fail(field, "missing");
    return it->second;
  }

  uint64_t unsigned_integer(const std::string& field) const {
    const std::string& s = text(field);
    const std::optional<uint64_t> value = decimal(s);
    if (!value) fail(field, "expected a decimal unsigned integer below 2^64, got '" + s + "'");
    return *value;
  }

  nlohmann::json object(const std::string& field) const {
    const std::string& s = text(field);
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(s);
    } catch (const nlohmann::json::parse_error& e) {
      fail(field, strprintf("not valid JSON (at byte %zu)", e.byte));
    } catch (const nlohmann::json::exception&) {
      fail(field, "not valid JSON (a number out of range)");
    }
    if (!j.is_object()) fail(field, "expected a JSON object");
    return j;
  }

 private:
  const std::map<std::string, std::string>& meta_;
  const std::string& path_;
};

// "0:N" -> N. A checkpoint always holds the optimizer state of all parameters.
uint64_t optimizer_elements(const MetadataParser& p) {
  const std::string& s = p.text("optimizer_range");
  const std::optional<uint64_t> n =
      s.starts_with("0:") ? decimal(std::string_view(s).substr(2)) : std::nullopt;
  if (!n) p.fail("optimizer_range", "expected '0:N' (the whole parameter buffer), got '" + s + "'");
  return *n;
}

std::map<std::string, uint64_t> checksums(const MetadataParser& p) {
  std::map<std::string, uint64_t> out;
  const nlohmann::json sums = p.object("checksums");  // outlives the loop over its items
  for (const auto& [name, value] : sums.items()) {
    const std::string hex = value.is_string() ? value.get<std::string>() : "";
    uint64_t sum = 0;
    const auto [end, ec] = std::from_chars(hex.data(), hex.data() + hex.size(), sum, 16);
    if (hex.size() != 16 || hex.find_first_not_of("0123456789abcdef") != std::string::npos ||
        ec != std::errc() || end != hex.data() + hex.size()) {
      p.fail("checksums",
             "tensor '" + name + "': expected 16 lowercase hex digits, got " + value.dump());
    }
    out[name] = sum;
  }
  return out;
}

}  // namespace

std::string checksum_hex(uint64_t checksum) {
  return strprintf("%016llx", (unsigned long long)checksum);
}

std::map<std::string, std::string> checkpoint_metadata_strings(const CheckpointMetadata& m) {
  nlohmann::json sums = nlohmann::json::object();
  for (const auto& [name, sum] : m.checksums) sums[name] = checksum_hex(sum);
  return {{"format", kFormat},
          {"step", std::to_string(m.info.step)},
          {"data_cursor", std::to_string(m.info.data_cursor)},
          {"seed", std::to_string(m.info.seed)},
          {"world_size", std::to_string(m.info.world_size)},
          {"strategy", m.info.strategy},
          {"model", m.model.dump()},
          {"config", m.info.config.dump()},
          {"optimizer_range", "0:" + std::to_string(m.optimizer_elements)},
          {"checksums", sums.dump()},
          {"provenance", m.info.provenance.dump()}};
}

CheckpointMetadata parse_checkpoint_metadata(const std::map<std::string, std::string>& meta,
                                             const std::string& path) {
  const auto format = meta.find("format");
  if (format == meta.end()) {
    throw std::runtime_error(path + ": not an srkit checkpoint (its metadata has no 'format')");
  }
  if (format->second == kFormatWithoutChecksums) {
    throw std::runtime_error(printable(path) + ": checkpoint format '" + format->second +
                             "' has no tensor checksums; this build reads '" + kFormat +
                             "' only (resume it with the srkit version that wrote it)");
  }
  if (format->second != kFormat) {
    throw std::runtime_error(printable(path + ": unsupported checkpoint format '" + format->second +
                                       "' (expected '" + kFormat + "')"));
  }
  const MetadataParser p(meta, path);
  CheckpointMetadata m;
  m.info.step = p.unsigned_integer("step");
  m.info.data_cursor = p.unsigned_integer("data_cursor");
  m.info.seed = p.unsigned_integer("seed");
  const uint64_t world_size = p.unsigned_integer("world_size");
  if (world_size < 1 || world_size > uint64_t(INT_MAX)) {
    p.fail("world_size", "expected an integer from 1 to " + std::to_string(INT_MAX) + ", got " +
                             std::to_string(world_size));
  }
  m.info.world_size = int(world_size);
  m.info.strategy = p.text("strategy");
  if (m.info.strategy.empty()) p.fail("strategy", "empty");
  if (!meta.count("model")) {
    throw std::runtime_error(path +
                             ": checkpoint metadata has no 'model' (the model's shape), so "
                             "the weights cannot be matched to a model");
  }
  m.model = p.object("model");
  m.info.config = p.object("config");
  if (meta.count("provenance")) m.info.provenance = p.object("provenance");
  m.optimizer_elements = optimizer_elements(p);
  m.checksums = checksums(p);
  return m;
}

}  // namespace srkit

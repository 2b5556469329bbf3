#include "lib/precision.h"

#include <algorithm>
#include <stdexcept>

namespace srkit {
namespace {

// The kernel encoding, unchecked (bytes_per_param and describe need no validity).
AdamWRule encode(const PrecisionStrategy& s) {
  AdamWRule r;
  r.weights = s.weights;
  r.master = s.master;
  r.m = s.m;
  r.v = s.v;
  r.weight_sr = s.weight_rounding == Rounding::kStochastic;
  r.m_sr = s.m_rounding == Rounding::kStochastic;
  r.v_sr = s.v_rounding == Rounding::kStochastic;
  r.kahan = s.kahan;
  return r;
}

PrecisionStrategy make_preset(const char* name, DType w, MasterKind master, DType mv,
                              Rounding update, bool kahan) {
  PrecisionStrategy s;
  s.name = name;
  s.weights = w;
  s.master = master;
  s.m = s.v = mv;
  s.weight_rounding = update;
  s.kahan = kahan;
  return s;
}

// DESIGN.md's table. Rounding of the weights is "nearest" wherever SR does not apply.
const std::vector<PrecisionStrategy>& presets() {
  static const std::vector<PrecisionStrategy> all = {
      make_preset("fp32", DType::kF32, MasterKind::kNone, DType::kF32, Rounding::kNearest, false),
      make_preset("mixed", DType::kBF16, MasterKind::kF32, DType::kF32, Rounding::kNearest, false),
      make_preset("bf16", DType::kBF16, MasterKind::kNone, DType::kBF16, Rounding::kNearest, false),
      make_preset("bf16-sr", DType::kBF16, MasterKind::kNone, DType::kBF16, Rounding::kStochastic,
                  false),
      make_preset("bf16-kahan", DType::kBF16, MasterKind::kNone, DType::kBF16, Rounding::kNearest,
                  true),
      make_preset("bf16-rem16", DType::kBF16, MasterKind::kRem16, DType::kF32, Rounding::kNearest,
                  false),
  };
  return all;
}

const char* master_name(MasterKind k) {
  return k == MasterKind::kF32 ? "f32" : k == MasterKind::kRem16 ? "rem16" : "none";
}

const char* rounding_name(Rounding r) { return r == Rounding::kStochastic ? "sr" : "rn"; }

std::string state_name(DType t, Rounding r) {
  if (t == DType::kF32) return "f32";
  return std::string("bf16(") + rounding_name(r) + ")";
}

std::string update_name(const PrecisionStrategy& s) {
  if (s.weights == DType::kF32) return "f32";
  if (s.master == MasterKind::kF32) return "rn(master)";
  if (s.master == MasterKind::kRem16) return "rn(rem16)";
  if (s.kahan) return "rn+kahan";
  return rounding_name(s.weight_rounding);
}

// One override parser: the spec string, for messages.
class SpecParser {
 public:
  explicit SpecParser(const std::string& spec) : spec_(spec) {}

  [[noreturn]] void fail(const std::string& what) const {
    throw std::invalid_argument("precision \"" + spec_ + "\": " + what);
  }

  DType dtype(const std::string& key, const std::string& value) const {
    if (value == "f32") return DType::kF32;
    if (value == "bf16") return DType::kBF16;
    fail(key + " must be f32 or bf16, got \"" + value + "\"");
  }

  Rounding rounding(const std::string& key, const std::string& value) const {
    if (value == "rn") return Rounding::kNearest;
    if (value == "sr") return Rounding::kStochastic;
    fail(key + " must be rn or sr, got \"" + value + "\"");
  }

  MasterKind master(const std::string& value) const {
    if (value == "none") return MasterKind::kNone;
    if (value == "f32") return MasterKind::kF32;
    if (value == "rem16") return MasterKind::kRem16;
    fail("master must be none, f32 or rem16, got \"" + value + "\"");
  }

  bool on_off(const std::string& key, const std::string& value) const {
    if (value == "on") return true;
    if (value == "off") return false;
    fail(key + " must be on or off, got \"" + value + "\"");
  }

  void apply(PrecisionStrategy& s, const std::string& key, const std::string& value) const {
    if (key == "w") {
      s.weights = dtype(key, value);
    } else if (key == "master") {
      s.master = master(value);
    } else if (key == "m") {
      s.m = dtype(key, value);
    } else if (key == "v") {
      s.v = dtype(key, value);
    } else if (key == "update") {
      s.weight_rounding = rounding(key, value);
    } else if (key == "mround") {
      s.m_rounding = rounding(key, value);
    } else if (key == "vround") {
      s.v_rounding = rounding(key, value);
    } else if (key == "kahan") {
      s.kahan = on_off(key, value);
    } else {
      fail("unknown key \"" + key + "\" (expected w, master, m, v, update, mround, vround, kahan)");
    }
  }

 private:
  const std::string& spec_;
};

std::string preset_list() {
  std::string out;
  for (const std::string& n : strategy_preset_names()) out += (out.empty() ? "" : ", ") + n;
  return out;
}

}  // namespace

double PrecisionStrategy::bytes_per_param() const {
  return double(adamw_array_bytes(encode(*this)).total());
}

std::string PrecisionStrategy::describe() const {
  return std::string("w=") + dtype_name(weights) + " master=" + master_name(master) +
         " g=" + dtype_name(weights) + " m=" + state_name(m, m_rounding) +
         " v=" + state_name(v, v_rounding) + (kahan ? " kahan=bf16" : "") +
         " update=" + update_name(*this);
}

AdamWRule PrecisionStrategy::rule() const {
  const AdamWRule r = encode(*this);
  if (const char* why = adamw_rule_error(r)) {
    throw std::invalid_argument("precision \"" + name + "\": " + why);
  }
  return r;
}

const std::vector<std::string>& strategy_preset_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> n;
    for (const PrecisionStrategy& s : presets()) n.push_back(s.name);
    return n;
  }();
  return names;
}

PrecisionStrategy strategy_from_string(const std::string& spec) {
  const SpecParser parser(spec);
  const size_t colon = spec.find(':');
  const std::string preset = spec.substr(0, colon);
  const auto it = std::find_if(presets().begin(), presets().end(),
                               [&](const PrecisionStrategy& p) { return p.name == preset; });
  if (it == presets().end()) {
    parser.fail("unknown preset \"" + preset + "\" (expected one of " + preset_list() + ")");
  }
  PrecisionStrategy s = *it;
  if (colon == std::string::npos) return s;

  const std::string overrides = spec.substr(colon + 1);
  if (overrides.empty()) parser.fail("nothing after ':' (expected key=value,...)");
  std::vector<std::string> seen;
  size_t pos = 0;
  while (true) {
    const size_t comma = overrides.find(',', pos);
    const std::string item =
        overrides.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    const size_t eq = item.find('=');
    if (eq == std::string::npos || eq == 0) {
      parser.fail("override \"" + item + "\" is not key=value");
    }
    const std::string key = item.substr(0, eq);
    if (std::find(seen.begin(), seen.end(), key) != seen.end()) {
      parser.fail("key \"" + key + "\" given twice");
    }
    seen.push_back(key);
    parser.apply(s, key, item.substr(eq + 1));
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  s.name = spec;
  if (const char* why = adamw_rule_error(encode(s))) parser.fail(why);
  return s;
}

}  // namespace srkit

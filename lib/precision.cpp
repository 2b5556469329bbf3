#include "lib/precision.h"

#include <algorithm>
#include <stdexcept>

#include "lib/util/format.h"

namespace srkit {
namespace {

PrecisionStrategy make_preset(const char* name, DType w, MasterKind master, DType mv,
                              bool weight_sr, bool kahan, DType compute) {
  PrecisionStrategy s;
  s.name = name;
  s.compute = compute;
  s.rule.weights = w;
  s.rule.grads = w;
  s.rule.master = master;
  s.rule.m = s.rule.v = mv;
  s.rule.weight_sr = weight_sr;
  s.rule.kahan = kahan;
  return s;
}

// The table of docs/architecture.md ("Precision strategies"). Rounding of the weights is "nearest"
// wherever SR does not apply.
const std::vector<PrecisionStrategy>& presets() {
  constexpr bool kSR = true, kRN = false, kKahan = true, kNoKahan = false;
  constexpr DType kF32 = DType::kF32, kBF16 = DType::kBF16;
  static const std::vector<PrecisionStrategy> all = {
      make_preset("fp32", kF32, MasterKind::kNone, kF32, kRN, kNoKahan, kF32),
      make_preset("mixed", kBF16, MasterKind::kF32, kF32, kRN, kNoKahan, kBF16),
      make_preset("bf16", kBF16, MasterKind::kNone, kBF16, kRN, kNoKahan, kBF16),
      make_preset("bf16-sr", kBF16, MasterKind::kNone, kBF16, kSR, kNoKahan, kBF16),
      make_preset("bf16-kahan", kBF16, MasterKind::kNone, kBF16, kRN, kKahan, kBF16),
      make_preset("bf16-rem16", kBF16, MasterKind::kRem16, kF32, kRN, kNoKahan, kBF16),
      // PyTorch AMP "O1": fp32 weights, gradients and state; bf16 compute.
      make_preset("amp", kF32, MasterKind::kNone, kF32, kRN, kNoKahan, kBF16),
  };
  return all;
}

const char* master_name(MasterKind k) {
  return k == MasterKind::kF32 ? "f32" : k == MasterKind::kRem16 ? "rem16" : "none";
}

const char* rounding_name(bool sr) { return sr ? "sr" : "rn"; }

std::string state_name(DType t, bool sr) {
  if (t == DType::kF32) return "f32";
  return std::string("bf16(") + rounding_name(sr) + ")";
}

std::string update_name(const AdamWRule& r) {
  if (r.weights == DType::kF32) return "f32";
  if (r.master == MasterKind::kF32) return "rn(master)";
  if (r.master == MasterKind::kRem16) return "rn(rem16)";
  if (r.kahan) return "rn+kahan";
  return rounding_name(r.weight_sr);
}

// One override parser: the spec string, for messages.
class SpecParser {
 public:
  explicit SpecParser(const std::string& spec) : spec_(spec) {}

  // The spec and the parts of it quoted in `what` are the user's text: a
  // control character in them must not break the one-line message.
  [[noreturn]] void fail(const std::string& what) const {
    throw std::invalid_argument(printable("precision \"" + spec_ + "\": " + what));
  }

  DType dtype(const std::string& key, const std::string& value) const {
    if (value == "f32") return DType::kF32;
    if (value == "bf16") return DType::kBF16;
    fail(key + " must be f32 or bf16, got \"" + value + "\"");
  }

  // true for sr (stochastic), false for rn (to nearest).
  bool stochastic(const std::string& key, const std::string& value) const {
    if (value == "rn") return false;
    if (value == "sr") return true;
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
    AdamWRule& r = s.rule;
    if (key == "compute") {
      s.compute = dtype(key, value);
    } else if (key == "w") {
      r.weights = dtype(key, value);
    } else if (key == "g") {
      r.grads = dtype(key, value);
    } else if (key == "master") {
      r.master = master(value);
    } else if (key == "m") {
      r.m = dtype(key, value);
    } else if (key == "v") {
      r.v = dtype(key, value);
    } else if (key == "update") {
      r.weight_sr = stochastic(key, value);
    } else if (key == "mround") {
      r.m_sr = stochastic(key, value);
    } else if (key == "vround") {
      r.v_sr = stochastic(key, value);
    } else if (key == "kahan") {
      r.kahan = on_off(key, value);
    } else {
      fail("unknown key \"" + key +
           "\" (expected w, g, master, m, v, update, mround, vround, kahan, compute)");
    }
  }

 private:
  const std::string& spec_;
};

// Compute in the weights' own dtype, or in bf16 with f32 weights (O1).
const char* compute_error(const PrecisionStrategy& s) {
  if (s.compute == s.rule.weights) return nullptr;
  if (s.rule.weights == DType::kF32 && s.compute == DType::kBF16) return nullptr;
  return "compute=f32 needs w=f32 (bf16 weights are computed in bf16)";
}

std::string preset_list() {
  std::string out;
  for (const std::string& n : strategy_preset_names()) out += (out.empty() ? "" : ", ") + n;
  return out;
}

}  // namespace

double PrecisionStrategy::bytes_per_param() const {
  return double(adamw_array_bytes(rule).total());
}

double PrecisionStrategy::transient_bytes_per_param() const {
  return casts_for_compute() ? 2.0 * double(dtype_size(compute)) : 0.0;
}

std::string PrecisionStrategy::describe() const {
  const AdamWRule& r = rule;
  return std::string("w=") + dtype_name(r.weights) + " master=" + master_name(r.master) +
         " g=" + dtype_name(r.grads) + " m=" + state_name(r.m, r.m_sr) +
         " v=" + state_name(r.v, r.v_sr) + (r.kahan ? " kahan=bf16" : "") +
         " update=" + update_name(r) +
         (casts_for_compute() ? std::string(" compute=") + dtype_name(compute) : "");
}

void PrecisionStrategy::validate() const {
  if (const char* why = compute_error(*this)) {
    throw std::invalid_argument("precision \"" + name + "\": " + why);
  }
  if (const char* why = adamw_rule_error(rule)) {
    throw std::invalid_argument("precision \"" + name + "\": " + why);
  }
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
  const auto given = [&](const char* key) {
    return std::find(seen.begin(), seen.end(), key) != seen.end();
  };
  // A preset's compute dtype and gradients follow a w= override unless
  // compute= or g= is given.
  if (!given("compute")) s.compute = it->casts_for_compute() ? it->compute : s.rule.weights;
  if (!given("g")) s.rule.grads = s.rule.weights;
  if (const char* why = compute_error(s)) parser.fail(why);
  if (const char* why = adamw_rule_error(s.rule)) parser.fail(why);
  return s;
}

}  // namespace srkit

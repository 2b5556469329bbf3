#include "lib/train/resume_check.h"

#include <algorithm>
#include <stdexcept>

namespace srkit {
namespace {

// A compared config field and the --resume-override name that accepts a change.
struct Compared {
  const char* field;
  const char* override_name;
};

// The data is compared by content (token count and checksum of each split)
// where the checkpoint has it, so the same file by another path is the same data.
constexpr Compared kCompared[] = {
    {"data_tokens", "data"},
    {"data_checksum", "data"},
    {"val_tokens", "data"},
    {"val_checksum", "data"},
    {"global_batch", "batch"},
    {"seq_len", "seq-len"},
    {"steps", "steps"},
    {"lr", "lr"},
    {"min_lr", "min-lr"},
    {"warmup", "warmup"},
    {"schedule", "schedule"},
    {"beta1", "beta1"},
    {"beta2", "beta2"},
    {"eps", "eps"},
    {"weight_decay", "weight-decay"},
    {"clip", "clip"},
    {"sr_seed", "sr-seed"},
};

// Tokens per optimizer step in sequences: what the data order and the
// gradient's noise depend on. 2 ranks x batch 4 and 1 rank x batch 4 x
// accumulation 2 are the same run.
nlohmann::json global_batch(const nlohmann::json& config) {
  int64_t product = 1;
  for (const char* key : {"batch", "grad_accum", "world_size"}) {
    const auto it = config.find(key);
    if (it == config.end() && std::string(key) == "world_size") continue;  // older: 1 rank
    if (it == config.end() || !it->is_number_integer()) return nullptr;    // not compared
    product *= it->get<int64_t>();
  }
  return product;
}

bool contains(const std::vector<std::string>& names, const std::string& name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

// min_lr defaults to lr / 10, so a deliberate change of lr carries it along.
bool overridden(const std::vector<std::string>& overrides, const Compared& c) {
  return contains(overrides, c.override_name) ||
         (std::string(c.field) == "min_lr" && contains(overrides, "lr"));
}

nlohmann::json field_of(const nlohmann::json& config, const std::string& field) {
  if (!config.is_object()) return nullptr;
  if (field == "global_batch") return global_batch(config);
  const auto it = config.find(field);
  return it == config.end() ? nlohmann::json() : *it;
}

}  // namespace

const std::vector<std::string>& resume_override_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out;
    for (const Compared& c : kCompared) {
      if (std::find(out.begin(), out.end(), c.override_name) == out.end()) {
        out.push_back(c.override_name);
      }
    }
    return out;
  }();
  return names;
}

void check_resume_override_names(const std::vector<std::string>& names) {
  const std::vector<std::string>& known = resume_override_names();
  for (const std::string& name : names) {
    if (std::find(known.begin(), known.end(), name) != known.end()) continue;
    std::string list;
    for (const std::string& k : known) list += (list.empty() ? "" : ", ") + k;
    throw std::invalid_argument("--resume-override: unknown field '" + name + "' (expected " +
                                list + ")");
  }
}

std::vector<std::string> resume_config_differences(const nlohmann::json& saved,
                                                   const nlohmann::json& now,
                                                   const std::vector<std::string>& overrides) {
  std::vector<std::string> out;
  for (const Compared& c : kCompared) {
    const nlohmann::json a = field_of(saved, c.field), b = field_of(now, c.field);
    if (a.is_null() || b.is_null() || a == b) continue;
    if (overridden(overrides, c)) continue;
    const std::string entry =
        std::string(c.override_name) + " (checkpoint " + a.dump() + ", this run " + b.dump() + ")";
    // One entry per override name (the data's four fingerprints read as one),
    // and a min_lr that follows a listed lr is not listed again.
    auto listed = [&](const std::string& name) {
      return std::any_of(out.begin(), out.end(),
                         [&](const std::string& e) { return e.starts_with(name + " ("); });
    };
    if (listed(c.override_name)) continue;
    if (std::string(c.field) == "min_lr" && listed("lr")) continue;
    out.push_back(entry);
  }
  return out;
}

void check_resume_config(const std::string& checkpoint, const nlohmann::json& saved,
                         const nlohmann::json& now, const std::vector<std::string>& overrides) {
  const std::vector<std::string> diffs = resume_config_differences(saved, now, overrides);
  if (diffs.empty()) return;
  std::string list, names;
  for (const std::string& d : diffs) {
    if (!list.empty()) list += ", ";
    list += d;
    if (!names.empty()) names += ",";
    names += d.substr(0, d.find(' '));
  }
  throw std::invalid_argument("--resume " + checkpoint +
                              ": this run differs from the checkpoint's in " + list +
                              "; resume with the checkpoint's settings, or accept the " +
                              "change with --resume-override " + names);
}

}  // namespace srkit

#include "lib/audit/run_log.h"

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string_view>

#include "lib/util/format.h"
#include "lib/util/regular_file.h"

namespace srkit::audit {
namespace {

using nlohmann::json;

// A line that is not JSON; read_run_log decides whether it is an error.
struct MalformedLine {};

// The field a number belongs to is only known while parsing: nlohmann rejects
// a literal beyond the double range (1e309) during the parse, so the parser's
// callback remembers the last key read to name it.
json parse_line(std::string_view line, const std::string& where) {
  std::string last_key;
  auto remember_key = [&](int, json::parse_event_t event, json& parsed) {
    if (event == json::parse_event_t::key) last_key = parsed.get<std::string>();
    return true;
  };
  try {
    return json::parse(line, remember_key);
  } catch (const json::parse_error&) {
    throw MalformedLine{};
  } catch (const json::out_of_range&) {
    throw std::invalid_argument(where + ": field '" + printable(last_key) +
                                "': number outside the range of a double");
  } catch (const json::exception&) {
    throw MalformedLine{};
  }
}

// A required number; the error names the file, line and field.
double number(const json& j, const char* field, const std::string& where) {
  const auto it = j.find(field);
  if (it == j.end() || !it->is_number()) {
    throw std::invalid_argument(where + ": missing numeric field '" + field + "'");
  }
  return it->get<double>();
}

// A required step count: a JSON integer in [0, 2^64). A negative, fractional or
// huge value (-5, 2.5, 1e300) would not survive the cast to uint64_t.
uint64_t step_number(const json& j, const char* field, const std::string& where) {
  const auto it = j.find(field);
  if (it == j.end() || !it->is_number()) {
    throw std::invalid_argument(where + ": missing numeric field '" + field + "'");
  }
  if (!it->is_number_unsigned()) {
    throw std::invalid_argument(where + ": field '" + field +
                                "': expected a non-negative integer, got " + it->dump());
  }
  return it->get<uint64_t>();
}

// Telemetry fields older logs may lack default to 0.
double optional_number(const json& j, const char* field) {
  const auto it = j.find(field);
  return it != j.end() && it->is_number() ? it->get<double>() : 0.0;
}

// The optional "groups" object of a step record; the error names the group.
std::vector<GroupStepRecord> groups(const json& j, const std::string& where) {
  std::vector<GroupStepRecord> out;
  const auto it = j.find("groups");
  if (it == j.end()) return out;
  if (!it->is_object()) throw std::invalid_argument(where + ": \"groups\" must be an object");
  for (const auto& [name, g] : it->items()) {
    const std::string at = where + ": group '" + name + "'";
    if (!g.is_object()) throw std::invalid_argument(at + ": expected an object");
    GroupStepRecord r{name, number(g, "erased_frac", at), number(g, "update_weight_ratio", at)};
    if (!(r.erased_frac >= 0 && r.erased_frac <= 1)) {
      throw std::invalid_argument(at + ": erased_frac must be in [0, 1]");
    }
    if (!(r.update_weight_ratio >= 0 && std::isfinite(r.update_weight_ratio))) {
      throw std::invalid_argument(at + ": update_weight_ratio must be finite and >= 0");
    }
    out.push_back(std::move(r));
  }
  return out;
}

std::string pct(double f) { return strprintf("%.1f%%", 100 * f); }

void add_record(RunLog& log, const json& j, const std::string& where) {
  if (!j.is_object() || !j.contains("type") || !j["type"].is_string()) {
    throw std::invalid_argument(where + ": expected an object with a string \"type\"");
  }
  const std::string type = j["type"];
  if (type == "config") {
    const json& c = j.contains("config") ? j["config"] : j;
    if (c.is_object() && c.contains("strategy") && c["strategy"].is_string())
      log.strategy = c["strategy"];
  } else if (type == "step") {
    StepRecord s;
    s.step = step_number(j, "step", where);
    s.loss = number(j, "loss", where);
    s.lr = optional_number(j, "lr");
    s.grad_norm = optional_number(j, "grad_norm");
    s.update_weight_ratio = optional_number(j, "update_weight_ratio");
    s.erased_frac = optional_number(j, "erased_frac");
    s.m_stalled_frac = optional_number(j, "m_stalled_frac");
    s.v_stalled_frac = optional_number(j, "v_stalled_frac");
    s.groups = groups(j, where);
    log.steps.push_back(s);
  } else if (type == "eval") {
    log.evals.push_back({step_number(j, "step", where), number(j, "val_loss", where)});
  } else if (type == "shadow") {
    log.shadows.push_back({step_number(j, "step", where), number(j, "mean_abs_ulps", where),
                           number(j, "max_abs_ulps", where), number(j, "rel_drift", where)});
  }
}

}  // namespace

RunLog read_run_log(const std::string& path) {
  std::string text;
  try {
    text = RegularFile(path, "sr-train log").read_all();
  } catch (const std::runtime_error& e) {
    throw std::invalid_argument(e.what());  // a path the user named: bad input
  }
  RunLog log;
  log.path = path;
  log.strategy = "?";
  size_t begin = 0;
  for (size_t n = 1; begin < text.size(); ++n) {
    const size_t newline = text.find('\n', begin);
    const bool complete = newline != std::string::npos;
    const std::string_view line =
        std::string_view(text).substr(begin, complete ? newline - begin : std::string::npos);
    begin = complete ? newline + 1 : text.size();
    if (line.find_first_not_of(" \t\r") == std::string_view::npos) continue;
    const std::string where = printable(path) + ":" + std::to_string(n);
    json j;
    try {
      j = parse_line(line, where);
    } catch (const MalformedLine&) {
      // A writer killed mid-line leaves a last line without its newline: the
      // records before it are good, so the log is still readable.
      if (!complete) {
        log.warnings.push_back(where + ": last line incomplete, ignored");
        break;
      }
      throw std::invalid_argument(where + ": not a JSON object (malformed JSONL)");
    }
    add_record(log, j, where);
  }
  if (log.steps.empty())
    throw std::invalid_argument(printable(path) + ": no step records (not an sr-train log?)");
  return log;
}

RunSummary summarize(const RunLog& log, int windows, double stall_threshold) {
  if (windows < 1) throw std::invalid_argument("--windows: must be at least 1");
  if (!(stall_threshold > 0 && stall_threshold <= 1)) {
    throw std::invalid_argument("--stall-threshold: must be in (0, 1]");
  }
  RunSummary s;
  s.path = log.path;
  s.strategy = log.strategy;
  const size_t n = log.steps.size(), w = std::min<size_t>(size_t(windows), n);
  for (size_t k = 0; k < w; ++k) {
    const size_t a = k * n / w, b = (k + 1) * n / w;
    WindowSummary ws;
    ws.first_step = log.steps[a].step;
    ws.last_step = log.steps[b - 1].step;
    for (size_t i = a; i < b; ++i) {
      const StepRecord& r = log.steps[i];
      ws.loss += r.loss, ws.erased_frac += r.erased_frac;
      ws.update_weight_ratio += r.update_weight_ratio;
      ws.m_stalled_frac += r.m_stalled_frac, ws.v_stalled_frac += r.v_stalled_frac;
    }
    const double cnt = double(b - a);
    ws.loss /= cnt, ws.erased_frac /= cnt, ws.update_weight_ratio /= cnt;
    ws.m_stalled_frac /= cnt, ws.v_stalled_frac /= cnt;
    s.windows.push_back(ws);
  }
  // Stagnation is judged on the last window, where decayed learning rates bite.
  const WindowSummary& last = s.windows.back();
  if (last.erased_frac >= stall_threshold) {
    s.flags.push_back("weights stagnate: " + pct(last.erased_frac) +
                      " of updates below half a bf16 ulp (last window)");
  }
  if (last.m_stalled_frac >= stall_threshold) {
    s.flags.push_back("m stalls: " + pct(last.m_stalled_frac) + " of elements (last window)");
  }
  if (last.v_stalled_frac >= stall_threshold) {
    s.flags.push_back("v stalls: " + pct(last.v_stalled_frac) + " of elements (last window)");
  }
  if (!log.shadows.empty()) {
    s.has_shadow = true;
    s.last_shadow = log.shadows.back();
    for (const ShadowRecord& r : log.shadows) s.mean_shadow_ulps += r.mean_abs_ulps;
    s.mean_shadow_ulps /= double(log.shadows.size());
  }
  return s;
}

std::string telemetry_markdown(const std::vector<RunSummary>& runs) {
  std::string out =
      "| run | strategy | steps | loss | erased updates | update/weight | m stalled | v stalled "
      "|\n|---|---|---|---:|---:|---:|---:|---:|\n";
  for (const RunSummary& r : runs) {
    for (const WindowSummary& w : r.windows) {
      out += strprintf("| %s | %s | %llu-%llu | %.4f | %s | %.3g | %s | %s |\n", r.path.c_str(),
                       r.strategy.c_str(), static_cast<unsigned long long>(w.first_step),
                       static_cast<unsigned long long>(w.last_step), w.loss,
                       pct(w.erased_frac).c_str(), w.update_weight_ratio,
                       pct(w.m_stalled_frac).c_str(), pct(w.v_stalled_frac).c_str());
    }
  }
  return out;
}

std::string shadow_markdown(const std::vector<RunSummary>& runs) {
  std::string out =
      "| run | strategy | step | mean abs drift (ulps) | max abs drift (ulps) | relative drift | "
      "mean over log (ulps) |\n|---|---|---:|---:|---:|---:|---:|\n";
  for (const RunSummary& r : runs) {
    if (!r.has_shadow) continue;
    out += strprintf("| %s | %s | %llu | %.4g | %.4g | %.4g | %.4g |\n", r.path.c_str(),
                     r.strategy.c_str(), static_cast<unsigned long long>(r.last_shadow.step),
                     r.last_shadow.mean_abs_ulps, r.last_shadow.max_abs_ulps,
                     r.last_shadow.rel_drift, r.mean_shadow_ulps);
  }
  return out;
}

}  // namespace srkit::audit

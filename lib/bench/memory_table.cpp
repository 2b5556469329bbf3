#include "lib/bench/memory_table.h"

#include <algorithm>
#include <sstream>

#include "lib/model/param_layout.h"
#include "lib/util/format.h"

namespace srkit {

std::vector<MemoryRow> memory_rows(MemoryMatrixOptions o) {
  if (o.models.empty()) throw std::invalid_argument("--models: empty list");
  if (o.strategies.empty()) {
    for (const std::string& name : strategy_preset_names()) {
      o.strategies.push_back(strategy_from_string(name));
    }
  }
  std::vector<MemoryRow> rows;
  for (const GPTConfig& model : o.models) {
    for (int batch : o.batches) {
      for (int world : o.worlds) {
        for (int zero : o.zeros) {
          for (bool recompute : o.recompute) {
            const size_t first = rows.size();
            for (const PrecisionStrategy& strategy : o.strategies) {
              MemoryRow row;
              row.scenario.model = model;
              row.scenario.strategy = strategy;
              row.scenario.world = world;
              row.scenario.zero = zero;
              row.scenario.batch = batch;
              row.scenario.seq_len = o.seq_len == 0 ? model.max_seq_len : o.seq_len;
              row.scenario.recompute = recompute;
              row.scenario.device = o.device;
              row.scenario.threads = o.threads;
              row.estimate = estimate_memory(row.scenario);
              rows.push_back(std::move(row));
            }
            const auto mixed = std::find_if(
                rows.begin() + first, rows.end(),
                [](const MemoryRow& r) { return r.scenario.strategy.name == "mixed"; });
            if (mixed == rows.end()) continue;
            const double reference = double(mixed->estimate.total());
            for (size_t i = first; i < rows.size(); ++i) {
              rows[i].saving_vs_mixed = 1.0 - double(rows[i].estimate.total()) / reference;
            }
          }
        }
      }
    }
  }
  return rows;
}

std::string memory_unit_for(size_t largest_bytes) {
  return largest_bytes >= (size_t(10) << 30) ? "GiB" : "MiB";
}

std::string bytes_in_unit(size_t bytes, const std::string& unit) {
  return unit == "GiB" ? strprintf("%.2f", double(bytes) / double(size_t(1) << 30))
                       : strprintf("%.1f", double(bytes) / double(size_t(1) << 20));
}

std::string memory_auto_unit(const std::vector<MemoryRow>& rows) {
  size_t largest = 0;
  for (const MemoryRow& r : rows) largest = std::max(largest, r.estimate.total());
  return memory_unit_for(largest);
}

std::string memory_markdown_table(const std::vector<MemoryRow>& rows, const std::string& unit) {
  auto u = [&](size_t bytes) { return bytes_in_unit(bytes, unit); };
  const bool measured = std::any_of(
      rows.begin(), rows.end(), [](const MemoryRow& r) { return r.measured_total.has_value(); });
  std::ostringstream out;
  out << "| model | params | strategy | world | ZeRO | B | T | recompute | weights | master | "
         "grads | moments | kahan | activations | scratch | comm | total "
      << unit << " | total B/param | saving vs mixed |";
  if (measured) out << " measured " << unit << " | error |";
  out << "\n|---|---:|---|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:"
         "|"
         "---:|";
  if (measured) out << "---:|---:|";
  out << "\n";
  for (const MemoryRow& r : rows) {
    const MemoryScenario& s = r.scenario;
    const MemoryEstimate& e = r.estimate;
    const double params = double(ParamLayout(s.model).num_params());
    out << "| " << s.model.name << " | "
        << (params >= 1e9 ? strprintf("%.2fB", params / 1e9) : strprintf("%.2fM", params / 1e6))
        << " | " << s.strategy.name << " | " << s.world << " | " << s.zero << " | " << s.batch
        << " | " << s.seq_len << " | " << (s.recompute ? "on" : "off") << " | " << u(e.weights)
        << " | " << u(e.master) << " | " << u(e.grads) << " | " << u(e.moments) << " | "
        << u(e.kahan) << " | " << u(e.activations) << " | " << u(e.category(MemCategory::kScratch))
        << " | " << u(e.comm) << " | " << u(e.total()) << " | "
        << strprintf("%.2f", double(e.total()) / params) << " | "
        << (r.saving_vs_mixed ? strprintf("%.1f%%", 100.0 * *r.saving_vs_mixed) : "-") << " |";
    if (measured) {
      if (r.measured_total) {
        const double err = double(e.backend_total()) / double(*r.measured_total) - 1.0;
        out << " " << u(*r.measured_total) << " | " << strprintf("%+.2f%%", 100.0 * err) << " |";
      } else {
        out << " - | - |";
      }
    }
    out << "\n";
  }
  return out.str();
}

std::string memory_csv(const std::vector<MemoryRow>& rows) {
  std::ostringstream out;
  out << "model,num_params,strategy,world,zero,batch,seq_len,recompute,device,weights_bytes,"
         "master_bytes,grads_bytes,moments_bytes,kahan_bytes,activations_bytes,scratch_bytes,"
         "comm_bytes,total_bytes,saving_vs_mixed,measured_total_bytes\n";
  for (const MemoryRow& r : rows) {
    const MemoryScenario& s = r.scenario;
    const MemoryEstimate& e = r.estimate;
    out << s.model.name << "," << ParamLayout(s.model).num_params() << "," << s.strategy.name << ","
        << s.world << "," << s.zero << "," << s.batch << "," << s.seq_len << ","
        << (s.recompute ? 1 : 0) << "," << s.device << "," << e.weights << "," << e.master << ","
        << e.grads << "," << e.moments << "," << e.kahan << "," << e.activations << ","
        << e.category(MemCategory::kScratch) << "," << e.comm << "," << e.total() << ","
        << (r.saving_vs_mixed ? strprintf("%.5f", *r.saving_vs_mixed) : "") << ","
        << (r.measured_total ? std::to_string(*r.measured_total) : "") << "\n";
  }
  return out.str();
}

nlohmann::json memory_json(const std::vector<MemoryRow>& rows) {
  nlohmann::json out = nlohmann::json::array();
  for (const MemoryRow& r : rows) {
    const MemoryScenario& s = r.scenario;
    const MemoryEstimate& e = r.estimate;
    out.push_back({{"model", s.model.describe()},
                   {"num_params", ParamLayout(s.model).num_params()},
                   {"strategy", s.strategy.name},
                   {"world", s.world},
                   {"zero", s.zero},
                   {"batch", s.batch},
                   {"seq_len", s.seq_len},
                   {"recompute", s.recompute},
                   {"device", s.device},
                   {"bytes",
                    {{"weights", e.weights},
                     {"master", e.master},
                     {"grads", e.grads},
                     {"moments", e.moments},
                     {"kahan", e.kahan},
                     {"activations", e.activations},
                     {"scratch", e.category(MemCategory::kScratch)},
                     {"comm", e.comm},
                     {"total", e.total()}}},
                   {"saving_vs_mixed",
                    r.saving_vs_mixed ? nlohmann::json(*r.saving_vs_mixed) : nlohmann::json()},
                   {"measured_total_bytes",
                    r.measured_total ? nlohmann::json(*r.measured_total) : nlohmann::json()}});
  }
  return out;
}

}  // namespace srkit

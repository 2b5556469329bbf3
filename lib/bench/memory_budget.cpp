#include "lib/bench/memory_budget.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <sstream>
#include <stdexcept>

#include "lib/backend/backend.h"
#include "lib/bench/memory_table.h"
#include "lib/model/param_layout.h"
#include "lib/train/memory_check.h"
#include "lib/util/format.h"

namespace srkit {

size_t parse_memory_size(const std::string& text, const std::string& flag) {
  const std::string expected = flag +
                               ": expected a size such as 80GiB, 80GB, 512MiB or a byte count, or "
                               "'device' (got '" +
                               text + "')";
  size_t used = 0;
  double value = 0.0;
  try {
    value = std::stod(text, &used);
  } catch (const std::exception&) {
    throw std::invalid_argument(expected);
  }
  std::string unit = text.substr(used);
  unit.erase(std::remove_if(unit.begin(), unit.end(), [](unsigned char ch) { return ch == ' '; }),
             unit.end());
  std::string lower;
  for (unsigned char ch : unit) lower += char(std::tolower(ch));
  struct Unit {
    const char* name;
    double scale;
  };
  static const Unit kUnits[] = {
      {"", 1.0},       {"b", 1.0},    {"k", 0x1p10},   {"kib", 0x1p10}, {"m", 0x1p20},
      {"mib", 0x1p20}, {"g", 0x1p30}, {"gib", 0x1p30}, {"t", 0x1p40},   {"tib", 0x1p40},
      {"kb", 1e3},     {"mb", 1e6},   {"gb", 1e9},     {"tb", 1e12},
  };
  const Unit* match = nullptr;
  for (const Unit& u : kUnits) {
    if (lower == u.name) match = &u;
  }
  const double bytes = match ? value * match->scale : 0.0;
  if (!match || !std::isfinite(bytes) || bytes < 1.0 || bytes > 0x1p60) {
    throw std::invalid_argument(expected);
  }
  return size_t(bytes);
}

MemoryBudget resolve_memory_budget(const std::string& text, const std::string& device,
                                   int threads) {
  if (text != "device") {
    return {parse_memory_size(text, "--memory-budget"), "--memory-budget " + text};
  }
  const AvailableMemory have = make_backend(device, threads)->available_memory();
  if (have.bytes == 0) {
    throw std::invalid_argument("--memory-budget device: the " + device +
                                " backend cannot say how much memory it may allocate; give a "
                                "size such as 80GiB");
  }
  return {have.bytes, have.source};
}

int largest_batch_within(MemoryScenario s, size_t budget, int max_batch) {
  auto fits = [&](int batch) {
    s.batch = batch;
    return estimate_memory(s).total() <= budget;
  };
  if (max_batch < 1 || !fits(1)) return 0;
  // Doubling, then bisection between the last batch that fits and the first
  // that does not: the total grows with the batch (activations are linear in it).
  int lo = 1, hi = 2;
  while (hi <= max_batch && fits(hi)) {
    lo = hi;
    hi = hi > max_batch / 2 ? max_batch + 1 : hi * 2;
  }
  hi = std::min(hi, max_batch + 1);
  while (hi - lo > 1) {
    const int mid = lo + (hi - lo) / 2;
    (fits(mid) ? lo : hi) = mid;
  }
  return lo;
}

std::vector<BudgetAnswer> budget_answers(BudgetMatrixOptions o) {
  if (o.models.empty()) throw std::invalid_argument("--models: empty list");
  if (o.budget == 0) throw std::invalid_argument("--memory-budget: must be more than 0 bytes");
  if (o.strategies.empty()) {
    for (const std::string& name : strategy_preset_names()) {
      o.strategies.push_back(strategy_from_string(name));
    }
  }
  std::vector<BudgetAnswer> rows;
  for (const GPTConfig& model : o.models) {
    for (int world : o.worlds) {
      for (int zero : o.zeros) {
        for (bool recompute : o.recompute) {
          const size_t first = rows.size();
          for (const PrecisionStrategy& strategy : o.strategies) {
            BudgetAnswer a;
            MemoryScenario& s = a.scenario;
            s.model = model;
            s.strategy = strategy;
            s.world = world;
            s.zero = zero;
            s.seq_len = o.seq_len == 0 ? model.max_seq_len : o.seq_len;
            s.recompute = recompute;
            s.device = o.device;
            s.threads = o.threads;
            s.batch = 1;
            a.least_bytes = estimate_memory(s).total();  // validates the scenario
            a.largest_batch = largest_batch_within(s, o.budget, o.max_batch);
            s.batch = std::max(a.largest_batch, 1);
            a.at_largest = estimate_memory(s);
            rows.push_back(std::move(a));
          }
          const auto mixed =
              std::find_if(rows.begin() + first, rows.end(), [](const BudgetAnswer& r) {
                return r.scenario.strategy.name == "mixed" && r.largest_batch > 0;
              });
          if (mixed == rows.end()) continue;
          for (size_t i = first; i < rows.size(); ++i) {
            rows[i].batch_vs_mixed = double(rows[i].largest_batch) / double(mixed->largest_batch);
          }
        }
      }
    }
  }
  return rows;
}

std::string budget_markdown_table(const std::vector<BudgetAnswer>& rows, const MemoryBudget& budget,
                                  const std::string& unit) {
  auto u = [&](size_t bytes) { return bytes_in_unit(bytes, unit); };
  std::ostringstream out;
  out << "Largest micro-batch per rank within " << human_bytes(budget.bytes) << " ("
      << budget.source << "), from the memory model:\n\n";
  out << "| model | strategy | world | ZeRO | T | recompute | largest B | total " << unit
      << " at B | activations " << unit << " | least " << unit << " (B=1) | B vs mixed |\n"
      << "|---|---|---:|---:|---:|---|---:|---:|---:|---:|---:|\n";
  for (const BudgetAnswer& r : rows) {
    const MemoryScenario& s = r.scenario;
    out << "| " << s.model.name << " | " << s.strategy.name << " | " << s.world << " | " << s.zero
        << " | " << s.seq_len << " | " << (s.recompute ? "on" : "off") << " | ";
    if (r.largest_batch == 0) {
      out << "does not fit | - | - | " << u(r.least_bytes) << " | - |\n";
      continue;
    }
    out << r.largest_batch << " | " << u(r.at_largest.total()) << " | "
        << u(r.at_largest.activations) << " | " << u(r.least_bytes) << " | "
        << (r.batch_vs_mixed < 0 ? "-" : strprintf("%.2fx", r.batch_vs_mixed)) << " |\n";
  }
  return out.str();
}

nlohmann::json budget_json(const std::vector<BudgetAnswer>& rows, const MemoryBudget& budget) {
  nlohmann::json answers = nlohmann::json::array();
  for (const BudgetAnswer& r : rows) {
    const MemoryScenario& s = r.scenario;
    answers.push_back(
        {{"model", s.model.describe()},
         {"num_params", ParamLayout(s.model).num_params()},
         {"strategy", s.strategy.name},
         {"world", s.world},
         {"zero", s.zero},
         {"seq_len", s.seq_len},
         {"recompute", s.recompute},
         {"device", s.device},
         {"fits", r.largest_batch > 0},
         {"largest_batch", r.largest_batch},
         {"total_bytes_at_largest",
          r.largest_batch > 0 ? nlohmann::json(r.at_largest.total()) : nlohmann::json()},
         {"least_bytes", r.least_bytes},
         {"batch_vs_mixed",
          r.batch_vs_mixed < 0 ? nlohmann::json() : nlohmann::json(r.batch_vs_mixed)}});
  }
  return {{"budget_bytes", budget.bytes}, {"budget_source", budget.source}, {"answers", answers}};
}

}  // namespace srkit

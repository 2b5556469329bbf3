#include "lib/bench/budget_search.h"

#include <algorithm>
#include <sstream>
#include <stdexcept>

#include "lib/bench/memory_table.h"
#include "lib/bench/process_memory.h"
#include "lib/bench/train_report.h"
#include "lib/train/memory_check.h"
#include "lib/util/format.h"

namespace srkit {

bool BudgetCandidate::within_budget() const {
  return cell && cell->ok() && status.rfind("over budget", 0) != 0;
}

const CellResult* BudgetChoice::chosen_cell() const {
  return chosen < 0 ? nullptr : &*candidates[size_t(chosen)].cell;
}

namespace {

constexpr const char* kNoFit = "does not fit (memory model)";

MemoryScenario scenario_of(const BudgetSearchOptions& o, const GPTConfig& model,
                           const PrecisionStrategy& strategy, int T, const CellShape& shape) {
  MemoryScenario s;
  s.model = model;
  s.strategy = strategy;
  s.batch = shape.batch;
  s.seq_len = T;
  s.recompute = shape.recompute;
  s.grad_accum = shape.grad_accum;
  s.device = o.run.device;
  s.threads = o.run.threads;
  return s;
}

bool is_power_of_two(int x) { return x > 0 && (x & (x - 1)) == 0; }

}  // namespace

std::vector<BudgetCandidate> budget_candidates(const BudgetSearchOptions& o,
                                               const std::string& model_name,
                                               const PrecisionStrategy& strategy) {
  const GPTConfig model = gpt_preset(model_name);
  const int T = o.run.seq_len_for(model.max_seq_len);
  if (o.tokens_per_step == 0 || o.tokens_per_step % uint64_t(T) != 0 ||
      o.tokens_per_step / uint64_t(T) > uint64_t(1) << 20) {
    throw std::invalid_argument("--tokens-per-step " + std::to_string(o.tokens_per_step) +
                                ": expected a positive multiple of the sequence length of " +
                                model_name + " (T=" + std::to_string(T) +
                                "), at most 2^20 sequences");
  }
  const int sequences = int(o.tokens_per_step / uint64_t(T));
  std::vector<BudgetCandidate> out;
  for (bool recompute : {false, true}) {
    // Every power of two up to the first that does not fit (the total grows
    // with the batch), and every fitting divisor until the largest is known.
    const size_t first = out.size();
    int largest_fit = 0;
    for (int b = 1; b <= sequences; ++b) {
      if (sequences % b != 0) continue;
      BudgetCandidate c;
      c.shape = CellShape{b, sequences / b, recompute};
      c.model_bytes = estimate_memory(scenario_of(o, model, strategy, T, c.shape)).total();
      const bool fits = c.model_bytes <= o.budget.bytes;
      if (fits) largest_fit = b;
      if (!fits) c.status = kNoFit;
      if (is_power_of_two(b) || fits) out.push_back(std::move(c));
      if (!fits && is_power_of_two(b)) break;
    }
    // Of the fitting divisors that are not powers of two, only the largest stays.
    out.erase(std::remove_if(out.begin() + std::ptrdiff_t(first), out.end(),
                             [&](const BudgetCandidate& c) {
                               return !is_power_of_two(c.shape.batch) &&
                                      c.shape.batch != largest_fit;
                             }),
              out.end());
  }
  return out;
}

size_t least_budget_bytes(const BudgetSearchOptions& o, const std::string& model_name,
                          const PrecisionStrategy& strategy) {
  const GPTConfig model = gpt_preset(model_name);
  const int T = o.run.seq_len_for(model.max_seq_len);
  const int sequences = int(o.tokens_per_step / uint64_t(T));
  return estimate_memory(scenario_of(o, model, strategy, T, {1, sequences, true})).total();
}

namespace {

// Which fitting candidates to run first: all of them, or per recompute setting
// the largest, recomputation only where its batch is larger.
std::vector<size_t> first_runs(const std::vector<BudgetCandidate>& cands, bool all) {
  std::vector<size_t> runs;
  int largest[2] = {0, 0};
  size_t at[2] = {0, 0};
  for (size_t i = 0; i < cands.size(); ++i) {
    if (!cands[i].status.empty()) continue;
    if (all) runs.push_back(i);
    const int m = cands[i].shape.recompute ? 1 : 0;
    if (cands[i].shape.batch > largest[m]) largest[m] = cands[i].shape.batch, at[m] = i;
  }
  if (all) return runs;
  if (largest[0] > 0) runs.push_back(at[0]);
  if (largest[1] > largest[0]) runs.push_back(at[1]);
  return runs;
}

// The next smaller fitting candidate of the same recompute setting, not yet run.
std::optional<size_t> fallback_of(const std::vector<BudgetCandidate>& cands, size_t failed) {
  std::optional<size_t> best;
  for (size_t i = 0; i < cands.size(); ++i) {
    const BudgetCandidate& c = cands[i];
    if (!c.status.empty() || c.shape.recompute != cands[failed].shape.recompute ||
        c.shape.batch >= cands[failed].shape.batch) {
      continue;
    }
    if (!best || c.shape.batch > cands[*best].shape.batch) best = i;
  }
  return best;
}

void run_candidate(BudgetCandidate& c, const BudgetSearchOptions& o, const std::string& model,
                   const PrecisionStrategy& strategy, double peak_gflops) {
  TrainMatrixOptions run = o.run;
  run.mem_limit_bytes = o.budget.bytes;  // past it the backend throws: over budget
  reset_peak_rss();
  c.cell = run_train_cell(run, model, strategy, c.shape, peak_gflops);
  c.cell->rss_peak_bytes = peak_rss_bytes();
  const CellResult& r = *c.cell;
  if (r.status == "OOM") {
    c.status = "over budget when run: " + r.message;
  } else if (!r.ok()) {
    c.status = r.status + ": " + r.message;
  } else if (r.memory.total_peak > o.budget.bytes) {
    c.status = "over budget when run: measured peak " + human_bytes(r.memory.total_peak);
  } else {
    c.status = "ran";
  }
}

void compare_choices(std::vector<BudgetChoice>& choices) {
  for (BudgetChoice& c : choices) {
    const CellResult* mine = c.chosen_cell();
    if (!mine) continue;
    for (const BudgetChoice& other : choices) {
      const CellResult* theirs = other.chosen_cell();
      if (!theirs || other.model != c.model) continue;
      const double ratio = mine->tokens_per_s / theirs->tokens_per_s;
      if (other.strategy == "mixed") c.vs_mixed = ratio;
      if (other.strategy == "amp") c.vs_amp = ratio;
    }
  }
}

std::string ratio_text(double r) { return r < 0 ? "-" : strprintf("%.2fx", r); }

std::string shape_text(const CellShape& s) { return strprintf("%d x %d", s.batch, s.grad_accum); }

}  // namespace

BudgetSearchResult run_budget_search(BudgetSearchOptions o, std::FILE* progress) {
  o.run.batches = {1};  // unused: each candidate sets its own
  o.run.validate_and_complete();
  if (o.budget.bytes == 0) throw std::invalid_argument("--memory-budget: must be more than 0");
  BudgetSearchResult result;
  for (const std::string& model : o.run.models) {  // every flag checked before the first run
    for (const PrecisionStrategy& strategy : o.run.strategies) {
      BudgetChoice choice;
      choice.model = model;
      choice.strategy = strategy.name;
      choice.seq_len = o.run.seq_len_for(gpt_preset(model).max_seq_len);
      choice.candidates = budget_candidates(o, model, strategy);
      choice.least_bytes = least_budget_bytes(o, model, strategy);
      result.choices.push_back(std::move(choice));
    }
    // Nothing of this model fits: one error naming the strategy that needs least.
    const auto first = result.choices.end() - std::ptrdiff_t(o.run.strategies.size());
    const auto least = std::min_element(
        first, result.choices.end(),
        [](const BudgetChoice& a, const BudgetChoice& b) { return a.least_bytes < b.least_bytes; });
    if (least->least_bytes > o.budget.bytes) {
      throw std::invalid_argument(
          "--memory-budget " + human_bytes(o.budget.bytes) + ": " + model + " " + least->strategy +
          " needs at least " + human_bytes(least->least_bytes) +
          " per rank (B=1, recompute layer, T=" + std::to_string(least->seq_len) +
          "), the least of the strategies");
    }
  }
  result.peaks = strategy_peaks(o.run, &result.backend);
  result.options = o;
  if (progress) {
    std::fprintf(
        progress, "sr-bench: %s; budget %s (%s); peak %s\n", result.backend.c_str(),
        human_bytes(o.budget.bytes).c_str(), o.budget.source.c_str(),
        peaks_text(TrainMatrixResult{o.run, result.backend, result.peaks, true, {}}).c_str());
  }
  for (size_t index = 0; index < result.choices.size(); ++index) {
    BudgetChoice& choice = result.choices[index];
    // Choices are models x strategies, strategies innermost.
    const PrecisionStrategy& strategy = o.run.strategies[index % o.run.strategies.size()];
    std::vector<BudgetCandidate>& cands = choice.candidates;
    std::vector<size_t> queue = first_runs(cands, o.all_candidates);
    for (size_t q = 0; q < queue.size(); ++q) {
      BudgetCandidate& c = cands[queue[q]];
      if (progress) {
        std::fprintf(progress, "%s %s B=%d x %d T=%d recompute %s (model %s): %d + %d steps\n",
                     choice.model.c_str(), choice.strategy.c_str(), c.shape.batch,
                     c.shape.grad_accum, choice.seq_len, c.shape.recompute ? "on" : "off",
                     human_bytes(c.model_bytes).c_str(), o.run.warmup, o.run.steps);
        std::fflush(progress);
      }
      run_candidate(c, o, choice.model, strategy, result.peaks.at(strategy.compute).gflops);
      if (progress) {
        std::fprintf(progress, "  %s", c.status.c_str());
        if (c.cell->ok()) {
          std::fprintf(progress, ", %.1f ms/step, %.0f tok/s, peak %s", c.cell->ms_median,
                       c.cell->tokens_per_s, human_bytes(c.cell->memory.total_peak).c_str());
        }
        std::fprintf(progress, "\n");
        std::fflush(progress);
      }
      if (!c.within_budget()) {
        const std::optional<size_t> next = fallback_of(cands, queue[q]);
        if (next && std::find(queue.begin(), queue.end(), *next) == queue.end()) {
          queue.push_back(*next);
        }
      }
    }
    for (size_t i = 0; i < cands.size(); ++i) {
      BudgetCandidate& c = cands[i];
      if (c.status.empty()) {
        c.status = c.shape.recompute ? "not run: recomputation at no larger batch is slower"
                                     : "not run: a larger batch fits";
      }
      if (c.within_budget() &&
          (choice.chosen < 0 || c.cell->tokens_per_s > choice.chosen_cell()->tokens_per_s)) {
        choice.chosen = int(i);
      }
    }
    if (choice.chosen >= 0) cands[size_t(choice.chosen)].status = "chosen";
  }
  compare_choices(result.choices);
  return result;
}

std::string budget_search_markdown(const BudgetSearchResult& r) {
  const size_t budget = r.options.budget.bytes;
  const std::string unit = memory_unit_for(budget);
  auto u = [&](size_t bytes) { return bytes_in_unit(bytes, unit); };
  std::ostringstream out;
  out << "Budget " << human_bytes(budget) << " (" << r.options.budget.source << "), "
      << r.options.tokens_per_step << " tokens per optimizer step; B x A = micro-batch x "
      << "accumulation.\n";
  std::string model;
  for (const BudgetChoice& c : r.choices) {
    if (c.model != model) {
      model = c.model;
      out << "\n### " << model << ", T=" << c.seq_len << ": every candidate\n\n"
          << "| strategy | B x A | recompute | model " << unit << " | measured peak " << unit
          << " | ms/step | tok/s | status |\n|---|---:|---|---:|---:|---:|---:|---|\n";
    }
    for (const BudgetCandidate& k : c.candidates) {
      const bool ran = k.cell && k.cell->ok();
      out << "| " << c.strategy << " | " << shape_text(k.shape) << " | "
          << (k.shape.recompute ? "on" : "off") << " | " << u(k.model_bytes) << " | "
          << (ran ? u(k.cell->memory.total_peak) : "-") << " | "
          << (ran ? strprintf("%.1f", k.cell->ms_median) : "-") << " | "
          << (ran ? strprintf("%.0f", k.cell->tokens_per_s) : "-") << " | " << k.status << " |\n";
    }
  }
  model.clear();
  for (const BudgetChoice& c : r.choices) {
    if (c.model != model) {
      model = c.model;
      out << "\n### " << model << ", T=" << c.seq_len << ": each strategy's best within "
          << human_bytes(budget) << "\n\n"
          << "| strategy | B x A | recompute | peak / budget | ms/step | tok/s | vs mixed | "
             "vs amp |\n|---|---:|---|---:|---:|---:|---:|---:|\n";
    }
    const CellResult* best = c.chosen_cell();
    if (!best) {
      const std::string why = c.least_bytes > budget
                                  ? "does not fit: needs at least " + human_bytes(c.least_bytes)
                                  : "nothing confirmed within the budget";
      out << "| " << c.strategy << " | " << why << " | - | - | - | - | - | - |\n";
      continue;
    }
    out << "| " << c.strategy << " | " << best->batch << " x " << best->grad_accum << " | "
        << (best->recompute ? "on" : "off") << " | "
        << strprintf("%.2f", double(best->memory.total_peak) / double(budget)) << " | "
        << strprintf("%.1f", best->ms_median) << " | " << strprintf("%.0f", best->tokens_per_s)
        << " | " << ratio_text(c.vs_mixed) << " | " << ratio_text(c.vs_amp) << " |\n";
  }
  return out.str();
}

nlohmann::json budget_search_json(const BudgetSearchResult& r) {
  const BudgetSearchOptions& o = r.options;
  nlohmann::json choices = nlohmann::json::array();
  for (const BudgetChoice& c : r.choices) {
    nlohmann::json cands = nlohmann::json::array();
    for (const BudgetCandidate& k : c.candidates) {
      cands.push_back({{"batch", k.shape.batch},
                       {"grad_accum", k.shape.grad_accum},
                       {"recompute", k.shape.recompute},
                       {"model_bytes", k.model_bytes},
                       {"status", k.status},
                       {"cell", k.cell ? train_cell_json(*k.cell) : nlohmann::json()}});
    }
    choices.push_back({{"model", c.model},
                       {"strategy", c.strategy},
                       {"seq_len", c.seq_len},
                       {"least_bytes", c.least_bytes},
                       {"chosen", c.chosen < 0 ? nlohmann::json() : nlohmann::json(c.chosen)},
                       {"vs_mixed", c.vs_mixed < 0 ? nlohmann::json() : nlohmann::json(c.vs_mixed)},
                       {"vs_amp", c.vs_amp < 0 ? nlohmann::json() : nlohmann::json(c.vs_amp)},
                       {"candidates", cands}});
  }
  return {{"device", o.run.device},
          {"backend", r.backend},
          {"threads", o.run.threads},
          {"budget_bytes", o.budget.bytes},
          {"budget_source", o.budget.source},
          {"tokens_per_step", o.tokens_per_step},
          {"warmup_steps", o.run.warmup},
          {"timed_steps", o.run.steps},
          {"all_candidates", o.all_candidates},
          {"choices", choices}};
}

}  // namespace srkit

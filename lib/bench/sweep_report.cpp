#include "lib/bench/sweep_report.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <tuple>
#include <utility>

#include "lib/util/format.h"
#include "lib/util/svg.h"

namespace srkit {
namespace {

std::string join(const std::vector<std::string>& items, const char* sep) {
  std::string out;
  for (const std::string& s : items) out += (out.empty() ? "" : sep) + s;
  return out;
}

std::string point_text(const SweepPoint& p) {
  if (p.seeds == 0) return "-";
  if (p.diverged == p.seeds) {
    return strprintf("diverged (%d/%d, step %llu)", p.diverged, p.seeds,
                     (unsigned long long)p.first_diverged_step);
  }
  std::string text = strprintf("%.4f ± %.4f", p.mean, p.se);
  if (p.diverged > 0) text += strprintf(" (%d/%d diverged)", p.diverged, p.seeds);
  return text;
}

// The mean over seeds of the validation curves of one strategy at one lr,
// over the steps every seed evaluated.
svg::Series mean_val_curve(const std::string& strategy, double lr,
                           const std::vector<SweepCellResult>& cells) {
  std::map<uint64_t, std::pair<double, int>> by_step;
  int runs = 0;
  for (const SweepCellResult& c : cells) {
    if (c.strategy != strategy || c.lr != lr || !c.ok()) continue;
    ++runs;
    for (const auto& [step, loss] : c.val_curve) {
      by_step[step].first += loss;
      by_step[step].second += 1;
    }
  }
  svg::Series s;
  s.name = strategy + " (lr " + lr_text(lr) + ")";
  for (const auto& [step, sum_count] : by_step) {
    if (sum_count.second != runs) continue;
    s.x.push_back(double(step));
    s.y.push_back(sum_count.first / runs);
  }
  return s;
}

// Mean and standard error of xs (se 0 for a single value).
std::pair<double, double> mean_and_se(const std::vector<double>& xs) {
  const double n = double(xs.size());
  double mean = 0.0, ss = 0.0;
  for (double x : xs) mean += x / n;
  for (double x : xs) ss += (x - mean) * (x - mean);
  return {mean, n > 1 ? std::sqrt(ss / (n - 1) / n) : 0.0};
}

// The paired differences of every point from mixed's at the same lr (see
// SweepPoint::paired_mean).
void pair_with_mixed(SweepTable& t, const std::vector<SweepCellResult>& cells) {
  std::map<std::pair<double, uint64_t>, double> mixed;  // (lr, seed) -> loss
  for (const SweepCellResult& c : cells) {
    if (c.strategy == "mixed" && c.ok()) mixed[{c.lr, c.seed}] = c.val_loss;
  }
  for (SweepPoint& p : t.points) {
    std::vector<double> diffs;
    for (const SweepCellResult& c : cells) {
      if (c.strategy != p.strategy || c.lr != p.lr || !c.ok()) continue;
      const auto m = mixed.find({c.lr, c.seed});
      if (m != mixed.end()) diffs.push_back(c.val_loss - m->second);
    }
    if (diffs.empty()) continue;
    p.paired_seeds = int(diffs.size());
    std::tie(p.paired_mean, p.paired_se) = mean_and_se(diffs);
  }
}

std::string paired_text(const SweepPoint& p) {
  return p.paired_seeds == 0 ? "-" : strprintf("%+.4f ± %.4f", p.paired_mean, p.paired_se);
}

}  // namespace

SweepTable summarize_sweep(const SweepOptions& options, const std::vector<SweepCellResult>& cells) {
  SweepTable t;
  for (const PrecisionStrategy& s : options.strategies) t.strategies.push_back(s.name);
  t.lrs = options.lrs;
  for (const std::string& strategy : t.strategies) {
    for (double lr : t.lrs) {
      SweepPoint p;
      p.strategy = strategy;
      p.lr = lr;
      std::vector<double> losses;
      for (const SweepCellResult& c : cells) {
        if (c.strategy != strategy || c.lr != lr) continue;
        ++p.seeds;
        if (c.ok()) {
          losses.push_back(c.val_loss);
        } else {
          ++p.diverged;
          if (p.first_diverged_step == 0 || c.diverged_step < p.first_diverged_step) {
            p.first_diverged_step = c.diverged_step;
          }
        }
      }
      if (!losses.empty()) std::tie(p.mean, p.se) = mean_and_se(losses);
      t.points.push_back(p);
    }
  }
  for (size_t s = 0; s < t.strategies.size(); ++s) {
    SweepStrategySummary sum;
    sum.strategy = t.strategies[s];
    for (size_t l = 0; l < t.lrs.size(); ++l) {
      const SweepPoint& p = t.at(s, l);
      if (p.complete() && (!sum.has_best || p.mean < sum.best_loss)) {
        sum.has_best = true;
        sum.best_loss = p.mean;
        sum.best_lr = p.lr;
      }
    }
    for (size_t l = 0; l < t.lrs.size() && sum.has_best; ++l) {
      const SweepPoint& p = t.at(s, l);
      if (p.complete() && p.mean <= sum.best_loss * (1.0 + kNearBest)) {
        sum.largest_lr_within_1pct = std::max(sum.largest_lr_within_1pct, p.lr);
      }
    }
    t.summaries.push_back(sum);
  }
  pair_with_mixed(t, cells);
  const auto mixed =
      std::find_if(t.summaries.begin(), t.summaries.end(),
                   [](const SweepStrategySummary& s) { return s.strategy == "mixed"; });
  if (mixed != t.summaries.end() && mixed->has_best) {
    for (SweepStrategySummary& s : t.summaries) {
      if (s.has_best) s.vs_mixed = s.best_loss / mixed->best_loss;
    }
  }
  return t;
}

std::string sweep_markdown(const SweepOptions& o, const SweepTable& t, const std::string& ablated,
                           const std::vector<Ablation>& ablations) {
  const TrainConfig& c = o.base;
  std::vector<std::string> seeds;
  for (uint64_t s : o.seeds) seeds.push_back(std::to_string(s));
  std::string md = "# sr-bench sweep\n\n";
  md += strprintf(
      "Model %s, data %s, %d x %d tokens per step (grad accum %d), %llu steps (%llu tokens), "
      "%s schedule with %llu warm-up steps, min lr = %s, clip %g, weight decay %g; seeds %s; "
      "device %s, threads per cell: %d.\n\n",
      c.model.c_str(), c.data.empty() ? "synthetic" : c.data.c_str(), c.batch, c.seq_len,
      c.grad_accum, (unsigned long long)c.total_steps(),
      (unsigned long long)(c.total_steps() * c.tokens_per_step()), c.schedule.c_str(),
      (unsigned long long)c.warmup, c.min_lr < 0 ? "lr / 10" : lr_text(c.min_lr).c_str(),
      double(c.adamw.grad_clip), double(c.adamw.weight_decay), join(seeds, ", ").c_str(),
      c.device.c_str(), o.threads_per_cell());

  md += "## Final validation loss (mean ± standard error over seeds)\n\n| strategy |";
  for (double lr : t.lrs) md += " lr " + lr_text(lr) + " |";
  md += "\n|---|";
  for (size_t l = 0; l < t.lrs.size(); ++l) md += "---:|";
  md += "\n";
  for (size_t s = 0; s < t.strategies.size(); ++s) {
    md += "| " + t.strategies[s] + " |";
    for (size_t l = 0; l < t.lrs.size(); ++l)
      md += strprintf(" %s |", point_text(t.at(s, l)).c_str());
    md += "\n";
  }

  md += strprintf(
      "\n## Best learning rate per strategy\n\nBest: the lowest mean over learning rates at "
      "which every seed finished. Largest lr within %g%%: the largest such learning rate whose "
      "mean is within %g%% of the strategy's best.\n\n"
      "| strategy | best lr | best val loss | vs mixed's best | largest lr within %g%% |\n"
      "|---|---:|---:|---:|---:|\n",
      100 * kNearBest, 100 * kNearBest, 100 * kNearBest);
  for (const SweepStrategySummary& s : t.summaries) {
    if (!s.has_best) {
      md += "| " + s.strategy + " | - | every learning rate diverged | - | - |\n";
      continue;
    }
    md +=
        strprintf("| %s | %s | %.4f | %s | %s |\n", s.strategy.c_str(), lr_text(s.best_lr).c_str(),
                  s.best_loss, s.vs_mixed < 0 ? "-" : strprintf("%.4f", s.vs_mixed).c_str(),
                  lr_text(s.largest_lr_within_1pct).c_str());
  }

  const bool paired = std::any_of(t.points.begin(), t.points.end(), [](const SweepPoint& p) {
    return p.paired_seeds > 0 && p.strategy != "mixed";
  });
  if (paired) {
    md +=
        "\n## Paired differences from mixed\n\nPer seed, this strategy's final validation loss "
        "minus mixed's at the same learning rate and seed (same initialisation and batches); "
        "mean ± standard error over the seeds where both finished.\n\n| strategy |";
    for (double lr : t.lrs) md += " lr " + lr_text(lr) + " |";
    md += "\n|---|";
    for (size_t l = 0; l < t.lrs.size(); ++l) md += "---:|";
    md += "\n";
    for (size_t s = 0; s < t.strategies.size(); ++s) {
      if (t.strategies[s] == "mixed") continue;
      md += "| " + t.strategies[s] + " |";
      for (size_t l = 0; l < t.lrs.size(); ++l) {
        md += strprintf(" %s |", paired_text(t.at(s, l)).c_str());
      }
      md += "\n";
    }
  }

  if (!ablated.empty()) {
    md += "\n## Ablations of " + ablated + "\n\n";
    for (const Ablation& a : ablations) {
      md += a.spec.empty() ? "- " + a.what + ": not expressible (" + a.why + ")\n"
                           : "- `" + a.spec + "`: " + a.what + "\n";
    }
  }
  md +=
      "\nCharts: sweep-lr.svg (validation loss vs learning rate, bars: standard error), "
      "sweep-curves.svg (validation loss curves at each strategy's best learning rate).\n";
  return md;
}

std::string sweep_csv(const std::vector<SweepCellResult>& cells) {
  std::string csv =
      "strategy,lr,seed,status,diverged_step,val_loss,train_loss,steps_done,tokens,seconds\n";
  for (const SweepCellResult& c : cells) {
    csv += strprintf("\"%s\",%s,%llu,%s,%llu,%.17g,%.17g,%llu,%llu,%.3f\n", c.strategy.c_str(),
                     lr_text(c.lr).c_str(), (unsigned long long)c.seed, c.status.c_str(),
                     (unsigned long long)c.diverged_step, c.ok() ? c.val_loss : NAN,
                     c.ok() ? c.train_loss : NAN, (unsigned long long)c.steps_done,
                     (unsigned long long)c.tokens, c.seconds);
  }
  return csv;
}

nlohmann::json sweep_json(const SweepOptions& o, const SweepTable& t,
                          const std::vector<SweepCellResult>& cells) {
  nlohmann::json j;
  j["config"] = o.base.to_json();
  j["config"].erase("strategy");
  j["config"].erase("lr");
  j["config"].erase("seed");
  j["lrs"] = t.lrs;
  j["seeds"] = o.seeds;
  j["strategies"] = t.strategies;
  j["points"] = nlohmann::json::array();
  for (const SweepPoint& p : t.points) {
    nlohmann::json point = {{"strategy", p.strategy},
                            {"lr", p.lr},
                            {"seeds", p.seeds},
                            {"diverged", p.diverged},
                            {"first_diverged_step", p.first_diverged_step},
                            {"mean_val_loss", p.mean},
                            {"se_val_loss", p.se}};
    if (p.paired_seeds > 0) {
      point["vs_mixed_paired"] = {
          {"seeds", p.paired_seeds}, {"mean", p.paired_mean}, {"se", p.paired_se}};
    }
    j["points"].push_back(point);
  }
  j["summary"] = nlohmann::json::array();
  for (const SweepStrategySummary& s : t.summaries) {
    nlohmann::json r = {{"strategy", s.strategy}, {"has_best", s.has_best}};
    if (s.has_best) {
      r["best_lr"] = s.best_lr;
      r["best_val_loss"] = s.best_loss;
      r["largest_lr_within_1pct"] = s.largest_lr_within_1pct;
      if (s.vs_mixed >= 0) r["vs_mixed"] = s.vs_mixed;
    }
    j["summary"].push_back(r);
  }
  j["cells"] = nlohmann::json::array();
  for (const SweepCellResult& c : cells) {
    nlohmann::json r = c.to_json();
    r.erase("config");  // the shared part is above; the cell's own is in its result.json
    if (!c.ok()) {      // a diverged run has no final loss
      r.erase("val_loss");
      r.erase("train_loss");
    }
    j["cells"].push_back(r);
  }
  return j;
}

std::string sweep_lr_svg(const SweepTable& t) {
  svg::LineChart chart;
  chart.title = "Final validation loss vs peak learning rate (mean ± s.e. over seeds)";
  chart.x_label = "peak learning rate";
  chart.y_label = "validation loss";
  chart.log_x = true;
  for (size_t s = 0; s < t.strategies.size(); ++s) {
    svg::Series series;
    series.name = t.strategies[s];
    for (size_t l = 0; l < t.lrs.size(); ++l) {
      const SweepPoint& p = t.at(s, l);
      if (!p.complete()) continue;
      for (double y : {p.mean, p.mean + p.se, p.mean - p.se, p.mean}) {
        series.x.push_back(p.lr);
        series.y.push_back(y);
      }
    }
    chart.series.push_back(std::move(series));
  }
  return svg::render(chart);
}

std::string sweep_curves_svg(const SweepTable& t, const std::vector<SweepCellResult>& cells) {
  svg::LineChart chart;
  chart.title = "Validation loss at each strategy's best learning rate (mean over seeds)";
  chart.x_label = "step";
  chart.y_label = "validation loss";
  for (const SweepStrategySummary& s : t.summaries) {
    if (s.has_best) chart.series.push_back(mean_val_curve(s.strategy, s.best_lr, cells));
  }
  return svg::render(chart);
}

}  // namespace srkit

#include "lib/bench/sweep_grid.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <stdexcept>
#include <thread>

namespace srkit {

void SweepOptions::validate() const {
  auto require = [](bool ok, const std::string& what) {
    if (!ok) throw std::invalid_argument(what);
  };
  require(!strategies.empty(), "--strategies: empty list");
  require(!lrs.empty(), "--lrs: empty list");
  require(!seeds.empty(), "--seeds: empty list");
  require(!out_dir.empty(), "--out: a folder is required");
  for (double lr : lrs) {
    require(std::isfinite(lr) && lr > 0.0, "--lrs: " + lr_text(lr) + " must be a number > 0");
  }
  auto unique = [](auto items) {
    std::sort(items.begin(), items.end());
    return std::adjacent_find(items.begin(), items.end()) == items.end();
  };
  require(unique(lrs), "--lrs: a learning rate is listed twice");
  require(unique(seeds), "--seeds: a seed is listed twice");
  std::vector<std::string> names;
  for (const PrecisionStrategy& s : strategies) names.push_back(s.name);
  require(unique(names), "--strategies: a strategy is listed twice (--ablate adds its own)");
  require(jobs >= 1, "--jobs must be >= 1");
  require(threads >= 0, "--threads must be >= 0");
  require(curve_points >= 1, "--curve-points must be >= 1");
  // The cells would each fail on a missing file: say it once, before any runs.
  for (const auto& [flag, path] : {std::pair<const char*, const std::string&>{"--data", base.data},
                                   {"--val-data", base.val_data}}) {
    std::ifstream in(path);
    require(path.empty() || in.good(), std::string(flag) + " " + path + ": cannot read the file");
  }
  base.validate();
}

int SweepOptions::threads_per_cell() const {
  const int all = threads > 0 ? threads : int(std::max(1u, std::thread::hardware_concurrency()));
  return std::max(1, all / jobs);
}

int SweepOptions::eval_interval() const {
  const uint64_t steps = base.total_steps();
  return int(std::max<uint64_t>(1, steps / uint64_t(curve_points)));
}

std::vector<Ablation> ablations_of(const std::string& preset) {
  const std::vector<std::string>& presets = strategy_preset_names();
  if (std::find(presets.begin(), presets.end(), preset) == presets.end()) {
    throw std::invalid_argument("--ablate: \"" + preset + "\" is not a preset name");
  }
  // g=f32 would be a no-op where the preset's gradients are fp32 already.
  const bool f32_grads = strategy_from_string(preset).grads() == DType::kF32;
  std::vector<Ablation> out = {
      {preset + ":mround=sr,vround=sr", "SR on the moments m and v", ""},
      {preset + ":v=f32", "second moment v in fp32", ""},
      {f32_grads ? "" : preset + ":g=f32", "gradients in fp32",
       f32_grads ? "the preset's gradients are fp32 already" : ""},
      {"bf16-kahan", "Kahan-compensated round-to-nearest instead of SR", ""},
      {"mixed:m=bf16,v=bf16", "mixed precision (fp32 master) with bf16 moments", ""},
  };
  for (Ablation& a : out) {
    if (a.spec.empty()) continue;
    try {
      strategy_from_string(a.spec);
    } catch (const std::invalid_argument& e) {
      a.why = e.what();
      a.spec.clear();
    }
  }
  return out;
}

std::string strategy_folder(const std::string& spec) {
  std::string out = spec;
  std::replace(out.begin(), out.end(), ':', '@');
  std::replace(out.begin(), out.end(), ',', '+');
  return out;
}

std::string lr_text(double lr) {
  char buf[32];
  for (int digits = 6; digits <= 17; ++digits) {  // %g first: "0.0003", "10"
    std::snprintf(buf, sizeof buf, "%.*g", digits, lr);
    if (std::strtod(buf, nullptr) == lr) break;
  }
  return buf;
}

std::vector<SweepCell> sweep_cells(const SweepOptions& o) {
  std::vector<SweepCell> cells;
  // Seed outermost: a sweep stopped part way has whole seeds of the grid.
  for (uint64_t seed : o.seeds) {
    for (const PrecisionStrategy& s : o.strategies) {
      for (double lr : o.lrs) {
        SweepCell c;
        c.strategy = s;
        c.lr = lr;
        c.seed = seed;
        c.dir = o.out_dir + "/cells/" + strategy_folder(s.name) + "/lr" + lr_text(lr) + "/seed" +
                std::to_string(seed);
        cells.push_back(std::move(c));
      }
    }
  }
  return cells;
}

TrainConfig cell_config(const SweepOptions& o, const SweepCell& cell) {
  TrainConfig c = o.base;
  c.strategy = cell.strategy;
  c.lr = float(cell.lr);
  c.seed = cell.seed;
  c.threads = o.threads_per_cell();
  c.out_dir = cell.dir;
  c.log_file = cell.log_file();
  c.eval_interval = o.eval_interval();
  c.save_final = false;
  c.ckpt_interval = 0;
  c.sample_tokens = 0;
  c.quiet = true;
  c.comm = "single";
  c.resume.clear();
  return c;
}

}  // namespace srkit

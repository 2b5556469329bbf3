#include "lib/bench/train_report.h"

#include <cmath>
#include <sstream>
#include <stdexcept>

#include "lib/bench/flops.h"
#include "lib/precision.h"
#include "lib/util/format.h"

namespace srkit {
namespace {

constexpr const char* kPhases[] = {"forward", "backward", "optimizer", "communication"};

std::string mib(size_t bytes) { return strprintf("%.1f", double(bytes) / 1048576.0); }

std::string ratio(double x) { return x < 0 ? "-" : strprintf("%.2fx", x); }

size_t peak_of(const CellResult& c, MemCategory cat) { return c.memory.peak[int(cat)]; }

// {"bf16": {"gflops": ..., "source": ...}, "f32": {...}}: the compute dtypes the cells used.
nlohmann::json peaks_json(const TrainMatrixResult& r) {
  nlohmann::json out = nlohmann::json::object();
  for (const auto& [dt, peak] : r.peaks) {
    out[dtype_name(dt)] = {{"gflops", peak.gflops}, {"source", peak.source}};
  }
  return out;
}

std::string flops_formula() {
  return "6*N*B*T + 12*L*B*T^2*C (N parameters incl. padded vocabulary rows; attention QK^T "
         "and AV computed in full, not halved for the causal mask; x3 for forward+backward)";
}

}  // namespace

std::string train_markdown_table(const TrainMatrixResult& r) {
  std::ostringstream out;
  out << "| model | strategy | B | T | ms/step median | min | max | tok/s | GFLOP/s | MFU | "
         "weights MiB | master MiB | grads MiB | opt state MiB | activations MiB | scratch MiB | "
         "peak MiB | RSS MiB | state B/param | speedup vs mixed | memory vs mixed |\n"
      << "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
         "---:|---:|---:|\n";
  for (const CellResult& c : r.cells) {
    out << "| " << c.model << " | " << c.strategy << " | " << c.batch << " | " << c.seq_len
        << " | ";
    if (!c.ok()) {
      out << c.status;
      for (int i = 0; i < 16; ++i) out << " | -";
      out << " |\n";
      continue;
    }
    out << strprintf("%.1f | %.1f | %.1f | %.0f | %.2f | %.1f%%", c.ms_median, c.ms_min, c.ms_max,
                     c.tokens_per_s, c.gflops, 100.0 * c.mfu)
        << " | " << mib(peak_of(c, MemCategory::kWeights)) << " | "
        << mib(peak_of(c, MemCategory::kMaster)) << " | " << mib(peak_of(c, MemCategory::kGrads))
        << " | " << mib(peak_of(c, MemCategory::kOptState)) << " | "
        << mib(peak_of(c, MemCategory::kActivations)) << " | "
        << mib(peak_of(c, MemCategory::kScratch)) << " | " << mib(c.memory.total_peak) << " | "
        << mib(c.rss_peak_bytes) << " | " << strprintf("%.2f", c.state_bytes_per_param) << " | "
        << ratio(c.speedup_vs_mixed) << " | " << ratio(c.memory_vs_mixed) << " |\n";
  }
  return out.str();
}

std::string train_phases_table(const TrainMatrixResult& r) {
  std::ostringstream out;
  out << "| model | strategy | B | T | step ms (mean) | forward ms | backward ms | optimizer ms | "
         "communication ms | other ms |\n"
      << "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|\n";
  for (const CellResult& c : r.cells) {
    out << "| " << c.model << " | " << c.strategy << " | " << c.batch << " | " << c.seq_len;
    if (!c.ok()) {
      out << " | " << c.status << " | - | - | - | - | - |\n";
      continue;
    }
    out << strprintf(" | %.1f", c.phase_step_ms);
    double listed = 0.0;
    for (const char* phase : kPhases) {
      const auto it = c.phase_ms.find(phase);
      if (it == c.phase_ms.end()) {
        out << " | -";
      } else {
        out << strprintf(" | %.1f", it->second);
        listed += it->second;
      }
    }
    out << strprintf(" | %.1f |\n", c.phase_step_ms - listed);
  }
  return out.str();
}

std::vector<std::string> train_strategy_summaries(const TrainMatrixResult& r) {
  std::vector<std::string> lines;
  for (const PrecisionStrategy& strategy : r.options.strategies) {
    const std::string& s = strategy.name;
    int cells = 0, ran = 0, compared = 0;
    double log_speed = 0.0, log_mem = 0.0, best_mfu = 0.0;
    for (const CellResult& c : r.cells) {
      if (c.strategy != s) continue;
      ++cells;
      if (!c.ok()) continue;
      ++ran;
      best_mfu = std::max(best_mfu, c.mfu);
      if (c.speedup_vs_mixed > 0) {
        ++compared;
        log_speed += std::log(c.speedup_vs_mixed);
        log_mem += std::log(c.memory_vs_mixed);
      }
    }
    std::string line = strprintf("%s: %d/%d cells ran", s.c_str(), ran, cells);
    if (compared > 0 && s != "mixed") {
      line += strprintf("; vs mixed %.2fx tok/s, %.2fx peak memory (geometric mean of %d cell%s)",
                        std::exp(log_speed / compared), std::exp(log_mem / compared), compared,
                        compared == 1 ? "" : "s");
    }
    line += strprintf("; %.0f state bytes/param; best MFU %.1f%%",
                      strategy_from_string(s).bytes_per_param(), 100.0 * best_mfu);
    lines.push_back(line);
  }
  return lines;
}

std::string train_csv(const TrainMatrixResult& r) {
  std::ostringstream out;
  out << "model,strategy,batch,seq_len,grad_accum,recompute,status,num_params,timed_steps,ms_"
         "median,ms_min,ms_max,"
         "tokens_per_s,step_flops,gflops,mfu,peak_gflops,weights_bytes,master_bytes,grads_bytes,"
         "opt_state_bytes,activations_bytes,scratch_bytes,peak_bytes,rss_peak_bytes,"
         "state_bytes_per_param,speedup_vs_mixed,memory_vs_mixed\n";
  for (const CellResult& c : r.cells) {
    out << c.model << "," << c.strategy << "," << c.batch << "," << c.seq_len << "," << c.grad_accum
        << "," << (c.recompute ? 1 : 0) << "," << c.status << "," << c.num_params << ","
        << c.timed_steps << ","
        << strprintf("%.3f,%.3f,%.3f,%.1f,%.6g,%.3f,%.5f,%.1f", c.ms_median, c.ms_min, c.ms_max,
                     c.tokens_per_s, c.step_flops, c.gflops, c.mfu, c.peak_gflops);
    for (int cat = 0; cat < kNumMemCategories; ++cat) out << "," << c.memory.peak[cat];
    out << "," << c.memory.total_peak << "," << c.rss_peak_bytes << ","
        << strprintf("%.3f,%.4f,%.4f", c.state_bytes_per_param, c.speedup_vs_mixed,
                     c.memory_vs_mixed)
        << "\n";
  }
  return out.str();
}

nlohmann::json train_cell_json(const CellResult& c) {
  nlohmann::json j = {
      {"model", c.model},     {"strategy", c.strategy},     {"batch", c.batch},
      {"seq_len", c.seq_len}, {"grad_accum", c.grad_accum}, {"recompute", c.recompute},
      {"status", c.status},   {"num_params", c.num_params}, {"step_flops", c.step_flops}};
  if (!c.ok()) {
    j["message"] = c.message;
    return j;
  }
  nlohmann::json peak;
  for (int cat = 0; cat < kNumMemCategories; ++cat) {
    peak[mem_category_name(static_cast<MemCategory>(cat))] = c.memory.peak[cat];
  }
  peak["total"] = c.memory.total_peak;
  nlohmann::json phases;
  for (const auto& [name, ms] : c.phase_ms) phases[name] = ms;
  j["timed_steps"] = c.timed_steps;
  j["ms_per_step"] = {{"median", c.ms_median}, {"min", c.ms_min}, {"max", c.ms_max}};
  j["tokens_per_s"] = c.tokens_per_s;
  j["gflops"] = c.gflops;
  j["mfu"] = c.mfu;
  j["peak_gflops"] = c.peak_gflops;
  j["peak_bytes"] = peak;
  j["rss_peak_bytes"] = c.rss_peak_bytes;
  j["state_bytes_per_param"] = c.state_bytes_per_param;
  j["phase_ms_per_step"] = phases;
  j["phase_step_ms"] = c.phase_step_ms;
  j["speedup_vs_mixed"] =
      c.speedup_vs_mixed < 0 ? nlohmann::json() : nlohmann::json(c.speedup_vs_mixed);
  j["memory_vs_mixed"] =
      c.memory_vs_mixed < 0 ? nlohmann::json() : nlohmann::json(c.memory_vs_mixed);
  return j;
}

nlohmann::json train_json(const TrainMatrixResult& r) {
  const TrainMatrixOptions& o = r.options;
  nlohmann::json cells = nlohmann::json::array();
  for (const CellResult& c : r.cells) cells.push_back(train_cell_json(c));
  return {{"device", o.device},
          {"backend", r.backend},
          {"threads", o.threads},
          {"peaks", peaks_json(r)},
          {"flops_per_step", flops_formula()},
          {"warmup_steps", o.warmup},
          {"timed_steps", o.steps},
          {"mem_limit_bytes", o.mem_limit_bytes},
          {"rss_scope", r.rss_per_cell ? "cell (VmHWM reset before each cell)"
                                       : "process (VmHWM cumulative; reset refused)"},
          {"cells", cells},
          {"summaries", train_strategy_summaries(r)}};
}

}  // namespace srkit

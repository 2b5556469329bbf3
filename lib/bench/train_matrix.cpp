#include "lib/bench/train_matrix.h"

#include <algorithm>
#include <new>
#include <stdexcept>

#include "lib/backend/backend.h"
#include "lib/bench/bench_run.h"
#include "lib/bench/flops.h"
#include "lib/bench/process_memory.h"
#include "lib/model/param_layout.h"
#include "lib/precision.h"
#include "lib/train/trainer.h"
#include "lib/util/format.h"

namespace srkit {

int TrainMatrixOptions::seq_len_for(int model_max_seq_len) const {
  return seq_len > 0 ? seq_len : std::min(model_max_seq_len, kDefaultSeqLen);
}

void TrainMatrixOptions::validate_and_complete() {
  auto require = [](bool ok, const std::string& what) {
    if (!ok) throw std::invalid_argument(what);
  };
  require(!models.empty(), "--models: empty list");
  require(!batches.empty(), "--batches: empty list");
  if (strategies.empty()) {
    for (const std::string& name : strategy_preset_names()) {
      strategies.push_back(strategy_from_string(name));
    }
  }
  for (int b : batches) require(b >= 1, "--batches: " + std::to_string(b) + " must be >= 1");
  require(steps >= 1, "--steps must be >= 1 (got " + std::to_string(steps) + ")");
  require(warmup >= 0, "--warmup must be >= 0 (got " + std::to_string(warmup) + ")");
  require(seq_len >= 0,
          "--seq-len must be >= 1, or 0 for the default (got " + std::to_string(seq_len) + ")");
  require(threads >= 0, "--threads must be >= 0 (got " + std::to_string(threads) + ")");
  require(peak_gflops >= 0.0, "--peak-gflops must be > 0");
  for (const std::string& m : models) {
    const GPTConfig c = gpt_preset(m);  // throws naming the preset
    require(seq_len <= c.max_seq_len, "--seq-len " + std::to_string(seq_len) +
                                          " exceeds the maximum sequence length of " + m + " (" +
                                          std::to_string(c.max_seq_len) + ")");
  }
}

namespace {

struct Timing {
  double median, min, max;
};

Timing timing_of(std::vector<double> ms) {
  std::sort(ms.begin(), ms.end());
  const size_t n = ms.size();
  const double median = n % 2 ? ms[n / 2] : 0.5 * (ms[n / 2 - 1] + ms[n / 2]);
  return {median, ms.front(), ms.back()};
}

}  // namespace

CellResult run_train_cell(const TrainMatrixOptions& o, const std::string& model,
                          const PrecisionStrategy& strategy, const CellShape& shape,
                          double peak_gflops) {
  const GPTConfig mc = gpt_preset(model);
  const int batch = shape.batch;
  CellResult cell;
  cell.model = model;
  cell.strategy = strategy.name;
  cell.batch = batch;
  cell.grad_accum = shape.grad_accum;
  cell.recompute = shape.recompute;
  cell.seq_len = o.seq_len_for(mc.max_seq_len);
  cell.num_params = ParamLayout(mc).num_params();
  // Model FLOPs: a recomputed forward is work the model does not need, so it
  // lowers MFU rather than raising the count.
  cell.step_flops = train_step_flops(mc, batch, cell.seq_len) * shape.grad_accum;

  BenchRunSettings settings{o.device, o.threads, o.seed, o.mem_limit_bytes, o.sync_phases};
  settings.grad_accum = shape.grad_accum;
  settings.recompute = shape.recompute;
  try {
    const RunSummary r = run_bench_training(mc, strategy, batch, cell.seq_len,
                                            uint64_t(o.warmup + o.steps), settings);
    if (r.step_ms.size() != size_t(o.warmup + o.steps)) {
      throw std::runtime_error("sr-bench: a cell ran " + std::to_string(r.step_ms.size()) +
                               " steps, expected " + std::to_string(o.warmup + o.steps));
    }
    const std::vector<double> timed(r.step_ms.begin() + o.warmup, r.step_ms.end());
    const Timing t = timing_of(timed);
    cell.timed_steps = int(timed.size());
    cell.ms_median = t.median;
    cell.ms_min = t.min;
    cell.ms_max = t.max;
    cell.tokens_per_s = double(batch) * shape.grad_accum * cell.seq_len / (t.median * 1e-3);
    cell.gflops = cell.step_flops / (t.median * 1e-3) / 1e9;
    cell.peak_gflops = peak_gflops;
    cell.mfu = peak_gflops > 0 ? cell.gflops / peak_gflops : 0.0;
    cell.memory = r.memory;
    const auto& p = r.memory.peak;
    const size_t state = p[int(MemCategory::kWeights)] + p[int(MemCategory::kMaster)] +
                         p[int(MemCategory::kGrads)] + p[int(MemCategory::kOptState)];
    cell.state_bytes_per_param = double(state) / double(cell.num_params);
    double all_ms = 0.0;
    for (double ms : r.step_ms) all_ms += ms;
    const double steps_done = double(r.step_ms.size());
    cell.phase_step_ms = all_ms / steps_done;
    for (const auto& [phase, stat] : r.phases.stats()) {
      cell.phase_ms[phase] = stat.seconds * 1e3 / steps_done;
    }
  } catch (const OutOfMemory& e) {
    cell.status = "OOM";
    cell.message = e.what();
  } catch (const std::bad_alloc&) {
    cell.status = "OOM";
    cell.message = "host allocation failed (std::bad_alloc)";
  } catch (const TrainingDiverged& e) {
    cell.status = "diverged";
    cell.message = e.what();
  }
  return cell;
}

void compare_with_mixed(std::vector<CellResult>& cells) {
  for (CellResult& c : cells) {
    c.speedup_vs_mixed = c.memory_vs_mixed = -1.0;
    if (!c.ok()) continue;
    for (const CellResult& m : cells) {
      if (m.ok() && m.strategy == "mixed" && m.model == c.model && m.batch == c.batch &&
          m.seq_len == c.seq_len && m.grad_accum == c.grad_accum && m.recompute == c.recompute) {
        c.speedup_vs_mixed = m.ms_median / c.ms_median;
        c.memory_vs_mixed = double(c.memory.total_peak) / double(m.memory.total_peak);
      }
    }
  }
}

std::map<DType, PeakRate> strategy_peaks(const TrainMatrixOptions& o, std::string* backend_text) {
  // Validates --device and sets the OpenMP/BLAS threads the peak probe runs with.
  const std::unique_ptr<Backend> backend = make_backend(o.device, o.threads);
  if (backend_text) *backend_text = backend->description();
  std::map<DType, PeakRate> peaks;
  for (const PrecisionStrategy& s : o.strategies) {
    if (!peaks.count(s.compute)) peaks[s.compute] = device_peak(*backend, o.peak_gflops, s.compute);
  }
  return peaks;
}

TrainMatrixResult run_train_matrix(TrainMatrixOptions o, std::FILE* progress) {
  o.validate_and_complete();
  TrainMatrixResult result;
  result.peaks = strategy_peaks(o, &result.backend);
  result.options = o;
  if (progress) {
    std::fprintf(progress, "sr-bench: %s; peak %s\n", result.backend.c_str(),
                 peaks_text(result).c_str());
  }
  const size_t total = o.models.size() * o.batches.size() * o.strategies.size();
  result.rss_per_cell = true;
  for (const std::string& model : o.models) {
    for (int batch : o.batches) {
      for (const PrecisionStrategy& strategy : o.strategies) {
        const size_t index = result.cells.size() + 1;
        const int T = o.seq_len_for(gpt_preset(model).max_seq_len);
        if (progress) {
          std::fprintf(progress, "[%zu/%zu] %s %s B=%d T=%d: %d warm-up + %d timed steps\n", index,
                       total, model.c_str(), strategy.name.c_str(), batch, T, o.warmup, o.steps);
          std::fflush(progress);
        }
        result.rss_per_cell = reset_peak_rss() && result.rss_per_cell;
        CellResult cell = run_train_cell(o, model, strategy, CellShape{batch},
                                         result.peaks.at(strategy.compute).gflops);
        cell.rss_peak_bytes = peak_rss_bytes();
        if (progress) {
          if (cell.ok()) {
            std::fprintf(progress, "[%zu/%zu]   %.1f ms/step (median), %.0f tok/s, MFU %.1f%%\n",
                         index, total, cell.ms_median, cell.tokens_per_s, 100.0 * cell.mfu);
          } else {
            std::fprintf(progress, "[%zu/%zu]   %s: %s\n", index, total, cell.status.c_str(),
                         cell.message.c_str());
          }
          std::fflush(progress);
        }
        result.cells.push_back(std::move(cell));
      }
    }
  }
  compare_with_mixed(result.cells);
  return result;
}

std::string peaks_text(const TrainMatrixResult& r) {
  std::string out;
  // bf16 first: the compute dtype of every strategy but fp32.
  for (DType dt : {DType::kBF16, DType::kF32}) {
    const auto it = r.peaks.find(dt);
    if (it == r.peaks.end()) continue;
    out += strprintf("%s%s %.1f GFLOP/s (%s)", out.empty() ? "" : ", ", dtype_name(dt),
                     it->second.gflops, it->second.source.c_str());
  }
  return out;
}

}  // namespace srkit

#include "lib/train/trainer.h"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <deque>
#include <filesystem>
#include <fstream>
#include <numeric>

#include "lib/data/sampler.h"
#include "lib/data/synthetic.h"
#include "lib/data/token_data.h"
#include "lib/model/gpt.h"
#include "lib/precision.h"
#include "lib/profiling.h"
#include "lib/train/checkpoint_io.h"
#include "lib/train/generate.h"
#include "lib/train/optimizer.h"

namespace srkit {

// ---- signals -------------------------------------------------------------------

namespace {
std::atomic<int> g_stop_signal{0};
extern "C" void on_stop_signal(int sig) { g_stop_signal.store(sig); }
}  // namespace

void install_stop_handlers() {
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
}

int stop_signal() { return g_stop_signal.load(); }

// ---- summary -------------------------------------------------------------------

nlohmann::json RunSummary::to_json() const {
  nlohmann::json mem;
  for (int c = 0; c < kNumMemCategories; ++c) {
    mem[mem_category_name(static_cast<MemCategory>(c))] = memory.peak[c];
  }
  mem["total"] = memory.total_peak;
  return {{"strategy", strategy},
          {"model", model},
          {"num_params", num_params},
          {"bytes_per_param", bytes_per_param},
          {"steps_done", steps_done},
          {"steps_total", steps_total},
          {"train_loss", train_loss},
          {"val_loss", val_loss < 0 ? nlohmann::json() : nlohmann::json(val_loss)},
          {"val_ppl", val_ppl < 0 ? nlohmann::json() : nlohmann::json(val_ppl)},
          {"tokens_per_s", tokens_per_s},
          {"train_seconds", train_seconds},
          {"peak_bytes", mem},
          {"checkpoint", checkpoint},
          {"log_file", log_file},
          {"interrupted", interrupted}};
}

// ---- the run ---------------------------------------------------------------------

struct Trainer::State {
  std::unique_ptr<Backend> backend;
  std::unique_ptr<GPT> model;
  std::unique_ptr<Optimizer> optimizer;
  PrecisionStrategy strategy;
  DataSplits data;
  std::unique_ptr<BatchSampler> sampler;
  std::unique_ptr<EvalWindows> eval;
  std::ofstream log;
  PhaseTimers timers;
};

Trainer::Trainer(TrainConfig config) : config_(std::move(config)) {}
Trainer::~Trainer() = default;

namespace {

bool stderr_is_tty() { return isatty(STDERR_FILENO) == 1; }

std::string format_eta(double seconds) {
  char buf[32];
  const long s = long(seconds + 0.5);
  std::snprintf(buf, sizeof buf, "%ld:%02ld", s / 60, s % 60);
  return buf;
}

DataSplits load_data(const TrainConfig& c) {
  if (c.data.empty()) {
    return split_tail(synthetic_corpus(c.seed, c.synthetic_bytes), c.val_fraction);
  }
  if (!c.val_data.empty()) {
    DataSplits s;
    s.train = load_tokens(c.data);
    s.val = load_tokens(c.val_data);
    return s;
  }
  return split_tail(load_tokens(c.data), c.val_fraction);
}

}  // namespace

RunSummary Trainer::run() {
  const TrainConfig& c = config_;
  c.validate();
  state_ = std::make_unique<State>();
  State& s = *state_;
  s.strategy = strategy_from_string(c.strategy);
  const GPTConfig mc = c.model_config();

  s.data = load_data(c);
  const int data_vocab = std::max(s.data.train.vocab_size, s.data.val.vocab_size);
  if (data_vocab > mc.vocab_size) {
    throw std::invalid_argument("data " + s.data.train.source + " has tokens up to " +
                                std::to_string(data_vocab - 1) + " but the model's vocabulary is " +
                                std::to_string(mc.vocab_size) + " (set --vocab)");
  }
  s.sampler = std::make_unique<BatchSampler>(s.data.train, c.seq_len, c.seed);
  if (s.data.val.tokens.size() > size_t(c.seq_len)) {
    s.eval = std::make_unique<EvalWindows>(s.data.val, c.seq_len);
  }

  s.backend = make_backend(c.device, c.threads);
  s.model = std::make_unique<GPT>(*s.backend, mc, s.strategy.weights);
  s.model->set_timers(&s.timers);
  s.model->init_weights(c.seed);
  s.optimizer = std::make_unique<Optimizer>(*s.model, s.strategy, c.seed);

  uint64_t start_step = 0;
  if (!c.resume.empty()) {
    const std::string path = resolve_checkpoint(c.resume);
    const CheckpointInfo info = load_checkpoint(path, *s.model, *s.optimizer);
    if (info.seed != c.seed) {
      throw std::invalid_argument("--resume: checkpoint " + path + " was written with seed " +
                                  std::to_string(info.seed) + ", this run has --seed " +
                                  std::to_string(c.seed));
    }
    start_step = info.step;
    if (!c.quiet)
      std::fprintf(stderr, "resumed from %s at step %llu\n", path.c_str(),
                   static_cast<unsigned long long>(start_step));
  }

  RunSummary summary;
  summary.strategy = s.strategy.name;
  summary.model = mc.describe();
  summary.num_params = s.model->layout().num_params();
  summary.bytes_per_param = s.strategy.bytes_per_param();
  summary.steps_total = c.total_steps();
  summary.steps_done = start_step;

  std::filesystem::create_directories(c.out_dir);
  summary.log_file =
      c.log_file.empty()
          ? (std::filesystem::path(c.out_dir) / (s.strategy.name + ".jsonl")).string()
          : c.log_file;
  s.log.open(summary.log_file, start_step > 0 ? std::ios::app : std::ios::trunc);
  if (!s.log) throw std::runtime_error("--log: cannot write " + summary.log_file);
  const std::string ckpt_dir =
      c.ckpt_dir.empty() ? (std::filesystem::path(c.out_dir) / ("ckpt-" + s.strategy.name)).string()
                         : c.ckpt_dir;
  if (start_step == 0) {
    nlohmann::json header = {{"type", "config"},
                             {"strategy", s.strategy.name},
                             {"strategy_detail", s.strategy.describe()},
                             {"model", mc.describe()},
                             {"backend", s.backend->description()},
                             {"config", c.to_json()}};
    s.log << header.dump() << "\n" << std::flush;
  }

  auto save = [&](uint64_t step) {
    CheckpointInfo info;
    info.step = step;
    info.data_cursor = step;
    info.seed = c.seed;
    info.strategy = s.strategy.name;
    info.config = c.to_json();
    const std::string path = checkpoint_path(ckpt_dir, step);
    ScopedPhase phase(&s.timers, "checkpoint");
    save_checkpoint(path, *s.model, *s.optimizer, info);
    summary.checkpoint = path;
  };

  auto evaluate = [&](uint64_t step) {
    if (!s.eval) return;
    ScopedPhase phase(&s.timers, "eval");
    const size_t windows = std::min<size_t>(s.eval->count(), size_t(c.eval_batches) * c.batch);
    std::vector<int32_t> in(size_t(c.batch) * c.seq_len), tg(in.size());
    double total = 0.0;
    size_t counted = 0;
    for (size_t w = 0; w < windows; w += size_t(c.batch)) {
      const int rows = int(std::min<size_t>(size_t(c.batch), windows - w));
      s.eval->fill(w, rows, in.data(), tg.data());
      total += double(s.model->forward(in.data(), tg.data(), rows, c.seq_len)) * rows;
      counted += size_t(rows);
    }
    summary.val_loss = total / double(counted);
    summary.val_ppl = std::exp(summary.val_loss);
    s.log << nlohmann::json({{"type", "eval"},
                             {"step", step},
                             {"val_loss", summary.val_loss},
                             {"val_ppl", summary.val_ppl}})
                 .dump()
          << "\n"
          << std::flush;
  };

  const LrSchedule schedule = c.lr_schedule();
  const uint64_t total = c.total_steps();
  const bool tty = stderr_is_tty() && !c.quiet;
  const uint64_t print_every = std::max<uint64_t>(1, total / 10);
  std::vector<int32_t> inputs(size_t(c.batch) * c.seq_len), targets(inputs.size());
  std::deque<double> recent_losses;
  double train_seconds = 0.0;
  uint64_t tokens_seen = start_step * c.tokens_per_step();
  const double n_elems = double(s.model->layout().total_size());

  for (uint64_t step = start_step + 1; step <= total; ++step) {
    const auto t0 = std::chrono::steady_clock::now();
    s.model->zero_grads();
    double loss = 0.0;
    for (int micro = 0; micro < c.grad_accum; ++micro) {
      // Global batch `step - 1`: samples micro*B .. micro*B+B-1 of it.
      s.sampler->fill(step - 1, uint64_t(micro) * c.batch, c.batch, inputs.data(), targets.data());
      const float l = s.model->forward(inputs.data(), targets.data(), c.batch, c.seq_len);
      s.model->backward(1.0f / float(c.grad_accum));
      loss += double(l) / c.grad_accum;
    }
    if (!std::isfinite(loss)) {
      throw TrainingDiverged("loss is " + std::to_string(loss) + " at step " +
                             std::to_string(step) + "; stopping (last checkpoint: " +
                             (summary.checkpoint.empty() ? "none" : summary.checkpoint) + ")");
    }
    OptimizerStepResult r;
    {
      ScopedPhase phase(&s.timers, "optimizer");
      const double norm = s.optimizer->grad_norm();
      if (!std::isfinite(norm)) {
        throw TrainingDiverged("gradient norm is not finite at step " + std::to_string(step) +
                               "; stopping (last checkpoint: " +
                               (summary.checkpoint.empty() ? "none" : summary.checkpoint) + ")");
      }
      r = s.optimizer->step(step, lr_at(schedule, step), c.adamw, norm);
    }
    s.backend->synchronize();
    const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    train_seconds += dt;
    summary.step_ms.push_back(dt * 1e3);
    tokens_seen += c.tokens_per_step();
    summary.steps_done = step;
    recent_losses.push_back(loss);
    if (recent_losses.size() > 10) recent_losses.pop_front();

    const AdamWTelemetry& t = r.telemetry;
    const double update_rms = std::sqrt(t.update_sq / n_elems);
    const double weight_rms = std::sqrt(t.weight_sq / n_elems);
    const double lr = lr_at(schedule, step);
    s.log << nlohmann::json({{"type", "step"},
                             {"step", step},
                             {"loss", loss},
                             {"lr", lr},
                             {"grad_norm", r.grad_norm},
                             {"clip_scale", r.clip_scale},
                             {"update_rms", update_rms},
                             {"weight_rms", weight_rms},
                             {"update_weight_ratio", weight_rms > 0 ? update_rms / weight_rms : 0},
                             {"erased_frac", t.nonzero ? double(t.erased) / double(t.nonzero) : 0},
                             {"m_stalled_frac", double(t.m_stalled) / double(t.n)},
                             {"v_stalled_frac", double(t.v_stalled) / double(t.n)},
                             {"tokens", tokens_seen},
                             {"ms", dt * 1e3},
                             {"tok_per_s", double(c.tokens_per_step()) / dt}})
                 .dump()
          << "\n";
    const double tok_s = double(tokens_seen - start_step * c.tokens_per_step()) / train_seconds;
    const double eta = double(total - step) * train_seconds / double(step - start_step);
    if (tty) {
      std::fprintf(stderr, "\r[%s] step %llu/%llu  loss %.4f  lr %.2e  %.0f tok/s  ETA %s   ",
                   s.strategy.name.c_str(), static_cast<unsigned long long>(step),
                   static_cast<unsigned long long>(total), loss, lr, tok_s,
                   format_eta(eta).c_str());
      if (step == total) std::fputc('\n', stderr);
    } else if (!c.quiet && (step % print_every == 0 || step == total)) {
      std::fprintf(stderr, "[%s] step %llu/%llu loss %.4f lr %.2e %.0f tok/s\n",
                   s.strategy.name.c_str(), static_cast<unsigned long long>(step),
                   static_cast<unsigned long long>(total), loss, lr, tok_s);
    }
    if (c.eval_interval > 0 && step % uint64_t(c.eval_interval) == 0 && step != total) {
      evaluate(step);
    }
    if (c.ckpt_interval > 0 && step % uint64_t(c.ckpt_interval) == 0) save(step);
    if (stop_signal() != 0) {
      if (tty) std::fputc('\n', stderr);
      save(step);
      summary.interrupted = true;
      s.log << std::flush;
      std::fprintf(stderr, "[%s] stopped by signal %d at step %llu; checkpoint %s\n",
                   s.strategy.name.c_str(), stop_signal(), static_cast<unsigned long long>(step),
                   summary.checkpoint.c_str());
      break;
    }
  }
  s.log << std::flush;

  if (!summary.interrupted) {
    if (c.final_eval) evaluate(summary.steps_done);
    if (c.save_final && (c.ckpt_interval == 0 || summary.steps_done % c.ckpt_interval != 0)) {
      save(summary.steps_done);
    }
  }
  summary.train_loss = recent_losses.empty()
                           ? 0.0
                           : std::accumulate(recent_losses.begin(), recent_losses.end(), 0.0) /
                                 double(recent_losses.size());
  summary.train_seconds = train_seconds;
  summary.tokens_per_s =
      train_seconds > 0
          ? double((summary.steps_done - start_step) * c.tokens_per_step()) / train_seconds
          : 0.0;
  summary.memory = s.backend->memory();

  if (c.sample_tokens > 0 && !summary.interrupted) {
    ScopedPhase phase(&s.timers, "sample");
    const TokenData& src = s.data.val.tokens.empty() ? s.data.train : s.data.val;
    const size_t prompt_len = std::min<size_t>(16, src.tokens.size());
    std::vector<int32_t> prompt(src.tokens.begin(), src.tokens.begin() + prompt_len);
    const std::vector<int32_t> out = generate(*s.model, prompt, c.sample_tokens, c.seq_len, c.seed);
    summary.sample = tokens_to_text(out, mc.vocab_size);
  }
  summary.phases = s.timers;
  nlohmann::json phases;
  for (const auto& [name, stat] : s.timers.stats()) {
    phases[name] = {{"seconds", stat.seconds}, {"calls", stat.calls}};
  }
  s.log << nlohmann::json({{"type", "summary"}, {"summary", summary.to_json()}, {"phases", phases}})
               .dump()
        << "\n"
        << std::flush;
  return summary;
}

}  // namespace srkit

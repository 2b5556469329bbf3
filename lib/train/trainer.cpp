#include "lib/train/trainer.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <deque>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <optional>

#include "lib/data/sampler.h"
#include "lib/data/synthetic.h"
#include "lib/data/token_data.h"
#include "lib/model/gpt.h"
#include "lib/precision.h"
#include "lib/profiling.h"
#include "lib/train/checkpoint_io.h"
#include "lib/train/data_parallel.h"
#include "lib/train/generate.h"
#include "lib/train/optimizer.h"
#include "lib/train/rank_agreement.h"
#include "lib/train/replica_check.h"
#include "lib/train/shadow_probe.h"

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
  char checksum[24];
  std::snprintf(checksum, sizeof checksum, "%016" PRIx64, weights_checksum);
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
          {"peak_bytes_per_rank", peak_bytes_per_rank},
          {"world_size", world_size},
          {"comm", comm},
          {"comm_seconds", comm_seconds},
          {"zero", zero},
          {"sr_seed", sr_seed},
          {"replica_checks", replica_checks},
          {"replica_max_ulps", replica_max_ulps},
          {"weights_checksum", checksum},
          {"checkpoint", checkpoint},
          {"log_file", log_file},
          {"interrupted", interrupted},
          {"stop_signal", stop_signal}};
}

// ---- the run ---------------------------------------------------------------------

// Members are destroyed in reverse order: the optimizer and model release into
// the backend, which goes after them; an owned communicator goes last.
struct Trainer::State {
  std::unique_ptr<Communicator> owned_comm;
  std::unique_ptr<Backend> backend;
  std::unique_ptr<GPT> model;
  std::unique_ptr<DataParallel> dp;
  std::unique_ptr<Optimizer> optimizer;
  PrecisionStrategy strategy;
  DataSplits data;
  std::unique_ptr<BatchSampler> sampler;
  std::unique_ptr<EvalWindows> eval;
  std::ofstream log;                    // rank 0 only
  std::unique_ptr<ShadowProbe> shadow;  // rank 0 only, --shadow-fp32
  PhaseTimers timers;
};

Trainer::Trainer(TrainConfig config) : config_(std::move(config)) {}
Trainer::Trainer(TrainConfig config, Communicator& comm)
    : config_(std::move(config)), comm_(&comm) {}
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

// --sr-seed per-rank folds the rank into the SR seed: each replica then rounds
// its copy of a weight with its own bits and the replicas drift apart (the
// failure mode shared randomness prevents). Rank 0 keeps the shared seed.
uint64_t sr_seed_of_rank(const TrainConfig& c, int rank) {
  return c.per_rank_sr_seed() ? c.seed + uint64_t(rank) * 0x9e3779b97f4a7c15ull : c.seed;
}

// The tensor holding flat element i, for messages.
std::string tensor_at(const ParamLayout& layout, size_t i) {
  for (const ParamTensor& t : layout.tensors()) {
    if (i >= t.offset && i < t.offset + t.count) return t.name;
  }
  return "alignment padding";
}

}  // namespace

RunSummary Trainer::run() {
  const TrainConfig& c = config_;
  c.validate();
  state_ = std::make_unique<State>();
  State& s = *state_;
  if (!comm_) s.owned_comm = make_communicator(c.comm, c.comm_timeout);
  Communicator& comm = comm_ ? *comm_ : *s.owned_comm;
  const int W = comm.world_size(), rank = comm.rank();
  const bool lead = rank == 0;  // the one rank that writes logs, checkpoints and progress
  const double comm_at_start = comm.comm_seconds();
  check_ranks_agree_on_config(comm, c);

  s.strategy = strategy_from_string(c.strategy);
  const GPTConfig mc = c.model_config();
  s.data = load_data(c);
  check_ranks_agree_on_data(comm, s.data);
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
  if (c.mem_limit_bytes > 0) s.backend->set_memory_limit(c.mem_limit_bytes);
  s.model = std::make_unique<GPT>(*s.backend, mc, s.strategy.weights);
  s.model->set_timers(&s.timers);
  s.model->init_weights(c.seed);
  s.dp = std::make_unique<DataParallel>(comm, *s.model, c.zero, &s.timers);
  s.optimizer = std::make_unique<Optimizer>(*s.model, s.strategy, sr_seed_of_rank(c, rank),
                                            s.dp->optimizer_begin(), s.dp->optimizer_end());

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
    if (!c.quiet && lead)
      std::fprintf(stderr, "resumed from %s at step %llu\n", path.c_str(),
                   static_cast<unsigned long long>(start_step));
  }
  check_ranks_agree_on_start(comm, start_step);
  if (lead && c.shadow_fp32 > 0) {  // after a resume, so the shadows start from its weights
    s.shadow = std::make_unique<ShadowProbe>(s.model->layout(), c.shadow_fp32, c.seed,
                                             s.optimizer->begin(), s.optimizer->end());
    s.shadow->init(*s.model, *s.optimizer);
  }

  const uint64_t total = c.total_steps(W);
  const uint64_t tokens_per_step = c.tokens_per_step(W);
  RunSummary summary;
  summary.strategy = s.strategy.name;
  summary.model = mc.describe();
  summary.num_params = s.model->layout().num_params();
  summary.bytes_per_param = s.strategy.bytes_per_param();
  summary.steps_total = total;
  summary.steps_done = start_step;
  summary.rank = rank;
  summary.world_size = W;
  summary.comm = comm.name();
  summary.zero = c.zero;
  summary.sr_seed = c.sr_seed;

  summary.log_file =
      c.log_file.empty()
          ? (std::filesystem::path(c.out_dir) / (s.strategy.name + ".jsonl")).string()
          : c.log_file;
  auto log = [&](const nlohmann::json& j) {
    if (lead) s.log << j.dump() << "\n";
  };
  if (lead) {
    std::filesystem::create_directories(c.out_dir);
    s.log.open(summary.log_file, start_step > 0 ? std::ios::app : std::ios::trunc);
    if (!s.log) throw std::runtime_error("--log: cannot write " + summary.log_file);
  }
  const std::string ckpt_dir =
      c.ckpt_dir.empty() ? (std::filesystem::path(c.out_dir) / ("ckpt-" + s.strategy.name)).string()
                         : c.ckpt_dir;
  if (start_step == 0) {
    log({{"type", "config"},
         {"strategy", s.strategy.name},
         {"strategy_detail", s.strategy.describe()},
         {"model", mc.describe()},
         {"backend", s.backend->description()},
         {"comm", comm.name()},
         {"world_size", W},
         {"config", c.to_json(W)}});
    s.log << std::flush;
  }

  // Under ZeRO-1 a collective (the optimizer state is gathered to rank 0).
  std::optional<uint64_t> saved_step;  // the last step this run wrote a checkpoint of
  auto save = [&](uint64_t step) {
    ScopedPhase phase(&s.timers, "checkpoint");
    const std::vector<HostStateBuffer> state = s.dp->gather_optimizer_state(*s.optimizer);
    const std::string path = checkpoint_path(ckpt_dir, step);
    if (lead) {
      CheckpointInfo info;
      info.step = step;
      info.data_cursor = step;
      info.seed = c.seed;
      info.strategy = s.strategy.name;
      info.config = c.to_json(W);
      info.world_size = W;
      save_checkpoint(path, *s.model, state, info);
    }
    summary.checkpoint = path;
    saved_step = step;
  };

  // A collective: batch i of the evaluation windows goes to rank i % W, and the
  // per-batch sums are added in batch order, as one rank would.
  auto evaluate = [&](uint64_t step) {
    if (!s.eval) return;
    ScopedPhase phase(&s.timers, "eval");
    const size_t B = size_t(c.batch);
    const size_t windows = std::min<size_t>(s.eval->count(), size_t(c.eval_batches) * B);
    const size_t batches = (windows + B - 1) / B, per_rank = (batches + W - 1) / size_t(W);
    std::vector<int32_t> in(B * c.seq_len), tg(in.size());
    std::vector<double> mine(per_rank, 0.0);
    for (size_t i = size_t(rank); i < batches; i += size_t(W)) {
      const int rows = int(std::min(B, windows - i * B));
      s.eval->fill(i * B, rows, in.data(), tg.data());
      mine[i / W] = double(s.model->forward(in.data(), tg.data(), rows, c.seq_len)) * rows;
    }
    const auto all = s.dp->all_gather(mine);
    double sum = 0.0;
    for (size_t i = 0; i < batches; ++i) sum += all[i % W][i / W];
    summary.val_loss = sum / double(windows);
    summary.val_ppl = std::exp(summary.val_loss);
    log({{"type", "eval"},
         {"step", step},
         {"val_loss", summary.val_loss},
         {"val_ppl", summary.val_ppl}});
    s.log << std::flush;
  };

  const bool progress = lead && !c.quiet;
  const bool tty = progress && stderr_is_tty();

  // A collective; throws on every rank if shared randomness failed.
  auto check_replicas = [&](uint64_t step) {
    const DataParallel::ReplicaReport report = s.dp->check_replicas();
    ++summary.replica_checks;
    nlohmann::json j = {{"type", "replica_check"}, {"step", step}, {"identical", report.identical}};
    if (report.identical) {
      log(j);
      return;
    }
    const UlpDivergence& worst = report.vs_rank0[report.worst_rank];
    summary.replica_max_ulps = std::max(summary.replica_max_ulps, worst.max_ulps);
    nlohmann::json per_rank = nlohmann::json::array();
    for (const UlpDivergence& d : report.vs_rank0) {
      per_rank.push_back({{"differing", d.differing}, {"max_ulps", d.max_ulps}});
    }
    const std::string tensor = tensor_at(s.model->layout(), worst.max_index);
    j.update({{"rank", report.worst_rank},
              {"differing", worst.differing},
              {"max_ulps", worst.max_ulps},
              {"tensor", tensor},
              {"per_rank", per_rank}});
    log(j);
    s.log << std::flush;
    const std::string what = "replicas differ after step " + std::to_string(step) + ": rank " +
                             std::to_string(report.worst_rank) + " differs from rank 0 in " +
                             std::to_string(worst.differing) + " of " +
                             std::to_string(s.model->layout().total_size()) + " weights, max " +
                             std::to_string(worst.max_ulps) + " ulps (in " + tensor + ")";
    if (!c.per_rank_sr_seed()) {
      throw std::runtime_error(what + "; with --sr-seed shared they must stay bit-identical");
    }
    if (progress) {
      if (tty) std::fputc('\n', stderr);
      std::fprintf(stderr, "[%s] %s (--sr-seed per-rank)\n", s.strategy.name.c_str(), what.c_str());
    }
  };

  const LrSchedule schedule = c.lr_schedule(W);
  const uint64_t print_every = std::max<uint64_t>(1, total / 10);
  const int A = c.grad_accum, B = c.batch;
  // The mean over the global batch of W * A micro-batches, folded once into the
  // backward's loss scale; the ranks' gradients are then summed.
  const float loss_scale = 1.0f / float(W * A);
  std::vector<int32_t> inputs(size_t(B) * c.seq_len), targets(inputs.size());
  std::deque<double> recent_losses;
  double train_seconds = 0.0;
  uint64_t tokens_seen = start_step * tokens_per_step;
  const double n_elems = double(s.model->layout().total_size());

  for (uint64_t step = start_step + 1; step <= total; ++step) {
    const auto t0 = std::chrono::steady_clock::now();
    const double comm_before = comm.comm_seconds();
    s.model->zero_grads();
    std::vector<double> micro_losses(static_cast<size_t>(A));
    for (int k = 0; k < A; ++k) {
      // Global micro-batch k * W + rank of global batch `step - 1`: the ranks
      // read disjoint slices, and world 1 with accumulation 2 reads the same
      // samples per step as world 2 with accumulation 1.
      const uint64_t first = (uint64_t(k) * uint64_t(W) + uint64_t(rank)) * uint64_t(B);
      s.sampler->fill(step - 1, first, B, inputs.data(), targets.data());
      micro_losses[k] = s.model->forward(inputs.data(), targets.data(), B, c.seq_len);
      s.model->backward(loss_scale);
    }
    s.dp->reduce_gradients();
    double shard_sumsq;
    {
      ScopedPhase phase(&s.timers, "optimizer");
      shard_sumsq = s.dp->shard_grad_sumsq();
    }
    const DataParallel::StepTotals totals =
        s.dp->exchange_step(micro_losses, shard_sumsq, stop_signal());
    const double loss = totals.loss;
    const int signal = totals.stop_signal;
    if (!std::isfinite(loss)) {
      throw TrainingDiverged("loss is " + std::to_string(loss) + " at step " +
                             std::to_string(step) + "; stopping (last checkpoint: " +
                             (summary.checkpoint.empty() ? "none" : summary.checkpoint) + ")");
    }
    OptimizerStepResult r;
    {
      ScopedPhase phase(&s.timers, "optimizer");
      const double norm = totals.grad_norm;
      if (!std::isfinite(norm)) {
        throw TrainingDiverged("gradient norm is not finite at step " + std::to_string(step) +
                               "; stopping (last checkpoint: " +
                               (summary.checkpoint.empty() ? "none" : summary.checkpoint) + ")");
      }
      r = s.optimizer->step(step, lr_at(schedule, step), c.adamw, norm);
    }
    s.dp->gather_weights();
    if (s.shadow) {  // gradients are reduced and the real weights updated: follow unrounded
      s.shadow->update(*s.model, step, lr_at(schedule, step), c.adamw, r.clip_scale);
      if (step % uint64_t(c.shadow_every) == 0 || step == total) {
        log(s.shadow->log_line(*s.model, step));
      }
    }
    const AdamWTelemetry t = s.dp->combine(r.telemetry);
    s.backend->synchronize();
    const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    train_seconds += dt;
    summary.step_ms.push_back(dt * 1e3);
    tokens_seen += tokens_per_step;
    summary.steps_done = step;
    recent_losses.push_back(loss);
    if (recent_losses.size() > 10) recent_losses.pop_front();

    const double update_rms = std::sqrt(t.update_sq / n_elems);
    const double weight_rms = std::sqrt(t.weight_sq / n_elems);
    const double lr = lr_at(schedule, step);
    log({{"type", "step"},
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
         {"comm_ms", (comm.comm_seconds() - comm_before) * 1e3},
         {"tok_per_s", double(tokens_per_step) / dt}});
    const double tok_s = double(tokens_seen - start_step * tokens_per_step) / train_seconds;
    const double eta = double(total - step) * train_seconds / double(step - start_step);
    if (tty) {
      std::fprintf(stderr, "\r[%s] step %llu/%llu  loss %.4f  lr %.2e  %.0f tok/s  ETA %s   ",
                   s.strategy.name.c_str(), static_cast<unsigned long long>(step),
                   static_cast<unsigned long long>(total), loss, lr, tok_s,
                   format_eta(eta).c_str());
      if (step == total) std::fputc('\n', stderr);
    } else if (progress && (step % print_every == 0 || step == total)) {
      std::fprintf(stderr, "[%s] step %llu/%llu loss %.4f lr %.2e %.0f tok/s\n",
                   s.strategy.name.c_str(), static_cast<unsigned long long>(step),
                   static_cast<unsigned long long>(total), loss, lr, tok_s);
    }
    if (W > 1 && c.replica_check > 0 && step % uint64_t(c.replica_check) == 0) {
      check_replicas(step);
    }
    if (c.eval_interval > 0 && step % uint64_t(c.eval_interval) == 0 && step != total) {
      evaluate(step);
    }
    if (c.ckpt_interval > 0 && step % uint64_t(c.ckpt_interval) == 0) save(step);
    if (signal != 0) {
      // Every rank saw the same signal in the exchange, so all stop after this step.
      if (tty) std::fputc('\n', stderr);
      if (saved_step != step) save(step);
      summary.interrupted = true;
      summary.stop_signal = signal;
      s.log << std::flush;
      if (lead) {
        std::fprintf(stderr, "[%s] stopped by signal %d at step %llu; checkpoint %s\n",
                     s.strategy.name.c_str(), signal, static_cast<unsigned long long>(step),
                     summary.checkpoint.c_str());
      }
      break;
    }
  }
  s.log << std::flush;

  if (!summary.interrupted) {
    if (c.final_eval) evaluate(summary.steps_done);
    // Also when no step ran (resumed at the last step): the checkpoint then
    // passes the state on, e.g. to another world size.
    if (c.save_final && saved_step != summary.steps_done) save(summary.steps_done);
  }
  summary.train_loss = recent_losses.empty()
                           ? 0.0
                           : std::accumulate(recent_losses.begin(), recent_losses.end(), 0.0) /
                                 double(recent_losses.size());
  summary.train_seconds = train_seconds;
  summary.tokens_per_s =
      train_seconds > 0
          ? double((summary.steps_done - start_step) * tokens_per_step) / train_seconds
          : 0.0;
  summary.memory = s.backend->memory();
  for (const std::vector<double>& q : s.dp->all_gather({double(summary.memory.total_peak)})) {
    summary.peak_bytes_per_rank.push_back(size_t(q[0]));
  }
  {
    std::vector<char> w(s.model->weight_bytes());
    s.backend->copy_to_host(w.data(), s.model->weights(), w.size());
    summary.weights_checksum = checksum_bytes(w.data(), w.size());
  }
  summary.comm_seconds = comm.comm_seconds() - comm_at_start;

  if (c.sample_tokens > 0 && !summary.interrupted && lead) {
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
  log({{"type", "summary"}, {"summary", summary.to_json()}, {"phases", phases}});
  s.log << std::flush;
  return summary;
}

}  // namespace srkit

#include "lib/train/trainer.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <deque>
#include <filesystem>
#include <numeric>
#include <optional>

#include "lib/backend/make_backend.h"
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
#include "lib/train/progress.h"
#include "lib/train/rank_agreement.h"
#include "lib/train/replica_check.h"
#include "lib/train/run_log.h"
#include "lib/train/sample_tokenizer.h"
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
          {"allocations_after_first_step", allocations_after_first_step},
          {"host_reads_after_first_step", host_reads_after_first_step},
          {"checkpoint", checkpoint},
          {"log_file", log_file},
          {"interrupted", interrupted},
          {"stop_signal", stop_signal}};
}

// ---- the run ---------------------------------------------------------------------

namespace {

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

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

// Everything one run holds, and its pieces: set-up, a training step, logging,
// evaluation, checkpoints, replica checks and the summary. Members are
// destroyed in reverse order: the optimizer, probe and model release into the
// backend, which goes after them; an owned communicator goes last.
class Trainer::State {
 public:
  State(const TrainConfig& config, Communicator* given_comm);
  RunSummary run();

 private:
  void set_up();
  void resume();
  // One optimizer step: the micro-batches, the gradient reduction, the clip
  // and AdamW on the device, then the step's one host read.
  DataParallel::StepTotals train_step(uint64_t step, bool log_this_step);
  void log_step(uint64_t step, const DataParallel::StepTotals& t, double seconds,
                double comm_seconds);
  void evaluate(uint64_t step);  // a collective
  void save(uint64_t step);      // a collective under ZeRO-1
  void check_replicas(uint64_t step);
  void finish();

  const TrainConfig& c_;
  std::unique_ptr<Communicator> owned_comm_;
  Communicator* comm_;
  std::unique_ptr<Backend> backend_;
  std::unique_ptr<GPT> model_;
  std::unique_ptr<DataParallel> dp_;
  std::unique_ptr<Optimizer> optimizer_;
  std::unique_ptr<ShadowProbe> shadow_;  // rank 0 only, --shadow-fp32
  DataSplits data_;
  std::unique_ptr<BatchSampler> sampler_;
  std::unique_ptr<BpeTokenizer> tokenizer_;  // --tokenizer: decodes the sample
  std::unique_ptr<EvalWindows> eval_;
  std::unique_ptr<RunLog> log_;
  std::unique_ptr<Progress> progress_;
  PhaseTimers timers_;

  int world_ = 1, rank_ = 0;
  bool lead_ = true;  // the one rank that writes logs, checkpoints and progress
  uint64_t start_step_ = 0, total_ = 0, tokens_per_step_ = 0;
  LrSchedule schedule_{};
  std::string ckpt_dir_;
  std::optional<uint64_t> saved_step_;  // the last step this run wrote a checkpoint of
  RunSummary summary_;
  std::deque<double> recent_losses_;
  double train_seconds_ = 0.0;
  double comm_at_start_ = 0.0;
  std::vector<int32_t> inputs_, targets_;
};

Trainer::Trainer(TrainConfig config) : config_(std::move(config)) {}
Trainer::Trainer(TrainConfig config, Communicator& comm)
    : config_(std::move(config)), comm_(&comm) {}
Trainer::~Trainer() = default;

RunSummary Trainer::run() {
  config_.validate();
  state_ = std::make_unique<State>(config_, comm_);
  return state_->run();
}

Trainer::State::State(const TrainConfig& config, Communicator* given_comm) : c_(config) {
  if (!given_comm) owned_comm_ = make_communicator(c_.comm, c_.comm_timeout);
  comm_ = given_comm ? given_comm : owned_comm_.get();
  world_ = comm_->world_size();
  rank_ = comm_->rank();
  lead_ = rank_ == 0;
}

void Trainer::State::set_up() {
  Communicator& comm = *comm_;
  check_ranks_agree_on_config(comm, c_);
  const GPTConfig mc = c_.model_config();
  data_ = load_data(c_);
  check_ranks_agree_on_data(comm, data_);
  const int data_vocab = std::max(data_.train.vocab_size, data_.val.vocab_size);
  if (data_vocab > mc.vocab_size) {
    throw std::invalid_argument("data " + data_.train.source + " has tokens up to " +
                                std::to_string(data_vocab - 1) + " but the model's vocabulary is " +
                                std::to_string(mc.vocab_size) + " (set --vocab)");
  }
  if (!c_.tokenizer.empty()) {
    std::string warning;
    tokenizer_ = open_sample_tokenizer(c_.tokenizer, mc.vocab_size, c_.data, warning);
    if (lead_ && !warning.empty()) std::fprintf(stderr, "warning: %s\n", warning.c_str());
  }
  sampler_ = std::make_unique<BatchSampler>(data_.train, c_.seq_len, c_.seed);
  if (data_.val.tokens.size() > size_t(c_.seq_len)) {
    eval_ = std::make_unique<EvalWindows>(data_.val, c_.seq_len);
  }

  backend_ = make_backend(c_.device, c_.threads);
  if (c_.mem_limit_bytes > 0) backend_->set_memory_limit(c_.mem_limit_bytes);
  model_ = std::make_unique<GPT>(*backend_, mc, c_.strategy.weights(), c_.strategy.compute);
  model_->set_timers(&timers_);
  if (c_.sync_phases) timers_.set_sync([this] { backend_->synchronize(); });
  model_->init_weights(c_.seed);
  dp_ = std::make_unique<DataParallel>(comm, *model_, c_.zero, c_.grad_accum, &timers_);
  optimizer_ = std::make_unique<Optimizer>(*model_, c_.strategy, sr_seed_of_rank(c_, rank_),
                                           dp_->optimizer_begin(), dp_->optimizer_end());
  resume();
  check_ranks_agree_on_start(comm, start_step_);
  if (lead_ && c_.shadow_fp32 > 0) {  // after a resume, so the shadows start from its weights
    shadow_ = std::make_unique<ShadowProbe>(*backend_, model_->layout(), c_.shadow_fp32, c_.seed,
                                            optimizer_->begin(), optimizer_->end());
    shadow_->init(*model_, *optimizer_);
  }

  total_ = c_.total_steps(world_);
  schedule_ = c_.lr_schedule(world_);
  tokens_per_step_ = c_.tokens_per_step(world_);
  const std::string& name = c_.strategy.name;
  summary_.strategy = name;
  summary_.model = mc.describe();
  summary_.num_params = model_->layout().num_params();
  summary_.bytes_per_param = c_.strategy.bytes_per_param();
  summary_.steps_total = total_;
  summary_.steps_done = start_step_;
  summary_.rank = rank_;
  summary_.world_size = world_;
  summary_.comm = comm.name();
  summary_.zero = c_.zero;
  summary_.sr_seed = c_.sr_seed;
  summary_.log_file = c_.log_file.empty()
                          ? (std::filesystem::path(c_.out_dir) / (name + ".jsonl")).string()
                          : c_.log_file;
  if (lead_) std::filesystem::create_directories(c_.out_dir);
  log_ = std::make_unique<RunLog>(summary_.log_file, lead_, start_step_ > 0);
  progress_ = std::make_unique<Progress>(lead_ && !c_.quiet, name, total_);
  ckpt_dir_ = c_.ckpt_dir.empty() ? (std::filesystem::path(c_.out_dir) / ("ckpt-" + name)).string()
                                  : c_.ckpt_dir;
  if (start_step_ == 0) {
    log_->write({{"type", "config"},
                 {"strategy", name},
                 {"strategy_detail", c_.strategy.describe()},
                 {"model", mc.describe()},
                 {"backend", backend_->description()},
                 {"comm", comm.name()},
                 {"world_size", world_},
                 {"config", c_.to_json(world_)}});
    log_->flush();
  }
  inputs_.resize(size_t(c_.batch) * c_.seq_len);
  targets_.resize(inputs_.size());
}

void Trainer::State::resume() {
  if (c_.resume.empty()) return;
  const std::string path = resolve_checkpoint(c_.resume);
  const CheckpointInfo info = load_checkpoint(path, *model_, *optimizer_);
  if (info.seed != c_.seed) {
    throw std::invalid_argument("--resume: checkpoint " + path + " was written with seed " +
                                std::to_string(info.seed) + ", this run has --seed " +
                                std::to_string(c_.seed));
  }
  start_step_ = info.step;
  if (!c_.quiet && lead_) {
    std::fprintf(stderr, "resumed from %s at step %llu\n", path.c_str(),
                 static_cast<unsigned long long>(start_step_));
  }
}

DataParallel::StepTotals Trainer::State::train_step(uint64_t step, bool log_this_step) {
  const int A = c_.grad_accum, B = c_.batch;
  // The mean over the global batch of W * A micro-batches, folded once into the
  // backward's loss scale; the ranks' gradients are then summed.
  const float loss_scale = 1.0f / float(world_ * A);
  for (int k = 0; k < A; ++k) {
    // Global micro-batch k * W + rank of global batch `step - 1`: the ranks
    // read disjoint slices, and world 1 with accumulation 2 reads the same
    // samples per step as world 2 with accumulation 1.
    const uint64_t first = (uint64_t(k) * uint64_t(world_) + uint64_t(rank_)) * uint64_t(B);
    sampler_->fill(step - 1, first, B, inputs_.data(), targets_.data());
    model_->forward_backward(inputs_.data(), targets_.data(), B, c_.seq_len, loss_scale,
                             k == 0 ? GradWrite::kOverwrite : GradWrite::kAccumulate,
                             dp_->loss_slot(k));
  }
  dp_->reduce_gradients();
  {
    ScopedPhase phase(&timers_, "optimizer");
    const GradClip* clip = dp_->exchange(stop_signal(), c_.adamw.grad_clip);
    optimizer_->step(step, float(lr_at(schedule_, step)), c_.adamw, clip,
                     log_this_step ? dp_->telemetry_slot() : nullptr);
  }
  const DataParallel::StepTotals t = dp_->finish_step(log_this_step);
  const std::string last =
      "; stopping (last checkpoint: " +
      (summary_.checkpoint.empty() ? std::string("none") : summary_.checkpoint) + ")";
  if (!std::isfinite(t.loss)) {
    throw TrainingDiverged("loss is " + std::to_string(t.loss) + " at step " +
                           std::to_string(step) + last);
  }
  if (!t.finite) {
    throw TrainingDiverged("gradient norm is not finite at step " + std::to_string(step) + last);
  }
  return t;
}

void Trainer::State::log_step(uint64_t step, const DataParallel::StepTotals& t, double seconds,
                              double comm_seconds) {
  const double n_elems = double(model_->layout().total_size());
  const AdamWTelemetry& tel = t.telemetry;
  const double update_rms = std::sqrt(tel.update_sq / n_elems);
  const double weight_rms = std::sqrt(tel.weight_sq / n_elems);
  log_->write({{"type", "step"},
               {"step", step},
               {"loss", t.loss},
               {"lr", lr_at(schedule_, step)},
               {"grad_norm", t.grad_norm},
               {"clip_scale", t.clip_scale},
               {"update_rms", update_rms},
               {"weight_rms", weight_rms},
               {"update_weight_ratio", weight_rms > 0 ? update_rms / weight_rms : 0},
               {"erased_frac", tel.nonzero ? double(tel.erased) / double(tel.nonzero) : 0},
               {"m_stalled_frac", tel.n ? double(tel.m_stalled) / double(tel.n) : 0},
               {"v_stalled_frac", tel.n ? double(tel.v_stalled) / double(tel.n) : 0},
               {"tokens", step * tokens_per_step_},
               {"ms", seconds * 1e3},
               {"comm_ms", comm_seconds * 1e3},
               {"tok_per_s", double(tokens_per_step_) / seconds}});
}

void Trainer::State::evaluate(uint64_t step) {
  if (!eval_) return;
  ScopedPhase phase(&timers_, "eval");
  // Batch i of the evaluation windows goes to rank i % W, and the per-batch
  // sums are added in batch order, as one rank would.
  const int W = world_;
  const size_t B = size_t(c_.batch);
  const size_t windows = std::min<size_t>(eval_->count(), size_t(c_.eval_batches) * B);
  const size_t batches = (windows + B - 1) / B, per_rank = (batches + W - 1) / size_t(W);
  std::vector<double> mine(per_rank, 0.0);
  for (size_t i = size_t(rank_); i < batches; i += size_t(W)) {
    const int rows = int(std::min(B, windows - i * B));
    eval_->fill(i * B, rows, inputs_.data(), targets_.data());
    mine[i / W] = double(model_->forward(inputs_.data(), targets_.data(), rows, c_.seq_len)) * rows;
  }
  const auto all = dp_->all_gather(mine);
  double sum = 0.0;
  for (size_t i = 0; i < batches; ++i) sum += all[i % W][i / W];
  summary_.val_loss = sum / double(windows);
  summary_.val_ppl = std::exp(summary_.val_loss);
  log_->write({{"type", "eval"},
               {"step", step},
               {"val_loss", summary_.val_loss},
               {"val_ppl", summary_.val_ppl}});
  log_->flush();
}

void Trainer::State::save(uint64_t step) {
  ScopedPhase phase(&timers_, "checkpoint");
  const std::vector<HostStateBuffer> state = dp_->gather_optimizer_state(*optimizer_);
  const std::string path = checkpoint_path(ckpt_dir_, step);
  if (lead_) {
    CheckpointInfo info;
    info.step = step;
    info.data_cursor = step;
    info.seed = c_.seed;
    info.strategy = c_.strategy.name;
    info.config = c_.to_json(world_);
    info.world_size = world_;
    save_checkpoint(path, *model_, state, info);
  }
  summary_.checkpoint = path;
  saved_step_ = step;
}

// A collective; throws on every rank if shared randomness failed.
void Trainer::State::check_replicas(uint64_t step) {
  const DataParallel::ReplicaReport report = dp_->check_replicas();
  ++summary_.replica_checks;
  nlohmann::json j = {{"type", "replica_check"}, {"step", step}, {"identical", report.identical}};
  if (report.identical) {
    log_->write(j);
    return;
  }
  const UlpDivergence& worst = report.vs_rank0[report.worst_rank];
  summary_.replica_max_ulps = std::max(summary_.replica_max_ulps, worst.max_ulps);
  nlohmann::json per_rank = nlohmann::json::array();
  for (const UlpDivergence& d : report.vs_rank0) {
    per_rank.push_back({{"differing", d.differing}, {"max_ulps", d.max_ulps}});
  }
  const std::string tensor = tensor_at(model_->layout(), worst.max_index);
  j.update({{"rank", report.worst_rank},
            {"differing", worst.differing},
            {"max_ulps", worst.max_ulps},
            {"tensor", tensor},
            {"per_rank", per_rank}});
  log_->write(j);
  log_->flush();
  const std::string what = "replicas differ after step " + std::to_string(step) + ": rank " +
                           std::to_string(report.worst_rank) + " differs from rank 0 in " +
                           std::to_string(worst.differing) + " of " +
                           std::to_string(model_->layout().total_size()) + " weights, max " +
                           std::to_string(worst.max_ulps) + " ulps (in " + tensor + ")";
  if (!c_.per_rank_sr_seed()) {
    throw std::runtime_error(what + "; with --sr-seed shared they must stay bit-identical");
  }
  progress_->note(what + " (--sr-seed per-rank)");
}

RunSummary Trainer::State::run() {
  comm_at_start_ = comm_->comm_seconds();
  set_up();
  const uint64_t log_every = uint64_t(c_.log_interval);
  BackendCounters after_first{};  // at the end of this run's first step
  uint64_t steps_run = 0;

  for (uint64_t step = start_step_ + 1; step <= total_; ++step) {
    const auto t0 = std::chrono::steady_clock::now();
    const double comm_before = comm_->comm_seconds();
    const bool log_this_step = step % log_every == 0 || step == total_;
    const DataParallel::StepTotals t = train_step(step, log_this_step);
    if (shadow_) {  // gradients are reduced and the real weights updated: follow unrounded
      shadow_->update(*model_, step, float(lr_at(schedule_, step)), c_.adamw, t.clip_scale);
      if (step % uint64_t(c_.shadow_every) == 0 || step == total_) {
        log_->write(shadow_->log_line(*model_, step));
      }
    }
    const double dt = seconds_since(t0);
    train_seconds_ += dt;
    summary_.step_ms.push_back(dt * 1e3);
    summary_.steps_done = step;
    if (++steps_run == 1) after_first = backend_->counters();
    recent_losses_.push_back(t.loss);
    if (recent_losses_.size() > 10) recent_losses_.pop_front();
    if (log_this_step) log_step(step, t, dt, comm_->comm_seconds() - comm_before);
    const double done = double(step - start_step_);
    progress_->step(step, t.loss, lr_at(schedule_, step),
                    double(uint64_t(done) * tokens_per_step_) / train_seconds_,
                    double(total_ - step) * train_seconds_ / done);

    if (world_ > 1 && c_.replica_check > 0 && step % uint64_t(c_.replica_check) == 0) {
      check_replicas(step);
    }
    if (c_.eval_interval > 0 && step % uint64_t(c_.eval_interval) == 0 && step != total_) {
      evaluate(step);
    }
    if (c_.ckpt_interval > 0 && step % uint64_t(c_.ckpt_interval) == 0) save(step);
    if (t.stop_signal != 0) {
      // Every rank saw the same signal in the exchange, so all stop after this step.
      if (saved_step_ != step) save(step);
      summary_.interrupted = true;
      summary_.stop_signal = t.stop_signal;
      log_->flush();
      if (lead_) {  // also under --quiet: the user needs to know where the run stands
        progress_->end_line();
        std::fprintf(stderr, "[%s] stopped by signal %d at step %llu; checkpoint %s\n",
                     summary_.strategy.c_str(), t.stop_signal,
                     static_cast<unsigned long long>(step), summary_.checkpoint.c_str());
      }
      break;
    }
  }
  if (steps_run > 0) {
    const BackendCounters now = backend_->counters();
    summary_.allocations_after_first_step = now.allocations - after_first.allocations;
    summary_.host_reads_after_first_step = now.host_reads - after_first.host_reads;
  }
  log_->flush();
  finish();
  return summary_;
}

void Trainer::State::finish() {
  if (!summary_.interrupted) {
    if (c_.final_eval) evaluate(summary_.steps_done);
    // Also when no step ran (resumed at the last step): the checkpoint then
    // passes the state on, e.g. to another world size.
    if (c_.save_final && saved_step_ != summary_.steps_done) save(summary_.steps_done);
  }
  summary_.train_loss = recent_losses_.empty()
                            ? 0.0
                            : std::accumulate(recent_losses_.begin(), recent_losses_.end(), 0.0) /
                                  double(recent_losses_.size());
  summary_.train_seconds = train_seconds_;
  summary_.tokens_per_s =
      train_seconds_ > 0
          ? double((summary_.steps_done - start_step_) * tokens_per_step_) / train_seconds_
          : 0.0;
  summary_.memory = backend_->memory();
  for (const std::vector<double>& q : dp_->all_gather({double(summary_.memory.total_peak)})) {
    summary_.peak_bytes_per_rank.push_back(size_t(q[0]));
  }
  {
    std::vector<char> w(model_->weight_bytes());
    backend_->copy_to_host(w.data(), model_->weights(), w.size());
    summary_.weights_checksum = checksum_bytes(w.data(), w.size());
  }
  summary_.comm_seconds = comm_->comm_seconds() - comm_at_start_;
  if (c_.sample_tokens > 0 && !summary_.interrupted && lead_) {
    ScopedPhase phase(&timers_, "sample");
    const TokenData& src = data_.val.tokens.empty() ? data_.train : data_.val;
    const size_t prompt_len = std::min<size_t>(16, src.tokens.size());
    std::vector<int32_t> prompt(src.tokens.begin(), src.tokens.begin() + prompt_len);
    const std::vector<int32_t> out =
        generate(*model_, prompt, c_.sample_tokens, c_.seq_len, c_.seed);
    summary_.sample = tokens_to_text(out, model_->config().vocab_size, tokenizer_.get());
  }
  summary_.phases = timers_;
  nlohmann::json phases;
  for (const auto& [name, stat] : timers_.stats()) {
    phases[name] = {{"seconds", stat.seconds}, {"calls", stat.calls}};
  }
  log_->write({{"type", "summary"}, {"summary", summary_.to_json()}, {"phases", phases}});
  log_->flush();
}

}  // namespace srkit

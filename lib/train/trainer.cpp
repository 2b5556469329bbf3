#include "lib/train/trainer.h"

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <deque>
#include <filesystem>
#include <numeric>
#include <optional>

#include "lib/backend/backend.h"
#include "lib/checkpoint/hf_gpt2.h"
#include "lib/checkpoint/hf_gpt2_config.h"
#include "lib/data/data_size.h"
#include "lib/data/sampler.h"
#include "lib/data/synthetic.h"
#include "lib/data/token_data.h"
#include "lib/model/gpt.h"
#include "lib/precision.h"
#include "lib/profiling.h"
#include "lib/train/checkpoint_io.h"
#include "lib/train/data_parallel.h"
#include "lib/train/generate.h"
#include "lib/train/group_telemetry.h"
#include "lib/train/memory_check.h"
#include "lib/train/optimizer.h"
#include "lib/train/progress.h"
#include "lib/train/rank_agreement.h"
#include "lib/train/replica_check.h"
#include "lib/train/resume_check.h"
#include "lib/train/run_log.h"
#include "lib/train/run_outputs.h"
#include "lib/train/sample_tokenizer.h"
#include "lib/train/shadow_probe.h"
#include "lib/util/atomic_file.h"
#include "lib/util/build_info.h"
#include "lib/util/dir_lock.h"
#include "lib/util/output_path.h"

namespace srkit {

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

// Bytes the loaded token streams take (known before reading: a run refuses data
// that does not fit instead of dying in std::bad_alloc part-way).
uint64_t data_bytes(const TrainConfig& c) {
  if (c.data.empty()) return 2 * uint64_t(c.synthetic_bytes);
  const uint64_t train = loaded_token_bytes(c.data);
  if (!c.val_data.empty()) return train + loaded_token_bytes(c.val_data);
  return train + uint64_t(double(train) * c.val_fraction);  // the val tail is copied out
}

std::string describe_data(const TrainConfig& c) {
  if (c.data.empty()) return "the built-in corpus";
  return c.data + (c.val_data.empty() ? "" : " and " + c.val_data);
}

std::string hex64(uint64_t x) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "%016" PRIx64, x);
  return buf;
}

// The data by content, in the run's config (log header and checkpoints): a
// resume compares it, so the same tokens under another path are the same data.
void add_data_fingerprint(nlohmann::json& config, const DataSplits& data) {
  config["data_tokens"] = data.train.tokens.size();
  config["data_checksum"] =
      hex64(checksum_bytes(data.train.tokens.data(), data.train.tokens.size() * sizeof(uint16_t)));
  config["val_tokens"] = data.val.tokens.size();
  config["val_checksum"] =
      hex64(checksum_bytes(data.val.tokens.data(), data.val.tokens.size() * sizeof(uint16_t)));
}

// What the run is doing, for "out of memory while ..." (std::bad_alloc carries
// no context). The previous activity comes back when the scope ends normally;
// during unwinding the slot keeps this one, for the handler to read.
class Activity {
 public:
  Activity(std::string& slot, std::string what)
      : slot_(slot), saved_(std::move(slot)), exceptions_(std::uncaught_exceptions()) {
    slot_ = std::move(what);
  }
  ~Activity() {
    if (std::uncaught_exceptions() == exceptions_) slot_ = std::move(saved_);
  }
  Activity(const Activity&) = delete;
  Activity& operator=(const Activity&) = delete;

 private:
  std::string& slot_;
  std::string saved_;
  int exceptions_;
};

// Tokens the model's vocabulary cannot embed, named by the data they came from.
void check_vocabulary(const TokenData& d, const GPTConfig& mc) {
  if (d.vocab_size > mc.vocab_size) {
    throw std::invalid_argument(
        "data " + d.source + " has tokens up to " + std::to_string(d.vocab_size - 1) +
        " but the model's vocabulary is " + std::to_string(mc.vocab_size) + " (set --vocab)");
  }
}

// Validation data, when there is any, must hold one evaluation window (T + 1
// tokens); otherwise the run would silently never evaluate.
void check_validation_window(const TokenData& val, int seq_len) {
  if (val.tokens.empty() || val.tokens.size() > size_t(seq_len)) return;
  throw std::invalid_argument(
      "validation data " + val.source + " has " + std::to_string(val.tokens.size()) +
      " tokens; one evaluation window needs --seq-len + 1 = " + std::to_string(seq_len + 1) +
      " (give more, or --val-fraction 0 to train without validation)");
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
  const std::string& activity() const { return activity_; }

 private:
  void set_up();
  void claim_outputs();
  void check_model_memory();
  void open_log(const GPTConfig& mc);
  void resume();
  // A failed log write stops the run after a last checkpoint, like a failed
  // checkpoint (an unwritten log is not a finished experiment).
  void check_log(uint64_t step);
  // One optimizer step: the micro-batches, the gradient reduction, the clip
  // and AdamW on the device, then the step's one host read.
  DataParallel::StepTotals train_step(uint64_t step, bool log_this_step);
  void log_step(uint64_t step, const DataParallel::StepTotals& t, double seconds,
                double comm_seconds);
  // A collective. Returns false (and marks the run interrupted) when a stop
  // signal cut it short on any rank; nothing is logged then.
  bool evaluate(uint64_t step);
  void mark_interrupted(int signal);
  void save(uint64_t step);  // a collective under ZeRO-1
  void check_replicas(uint64_t step);
  void finish();
  void report_stop();

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
  std::vector<std::shared_ptr<DirLock>> locks_;  // the output folders, held for the run's life
  std::string resume_path_;                      // the checkpoint resumed from, if any
  nlohmann::json run_config_;                    // to_json plus the data's fingerprint
  nlohmann::json provenance_;  // build, host, backend and world (lib/util/build_info.h)
  std::string activity_ = "starting";
  PhaseTimers timers_;

  int world_ = 1, rank_ = 0;
  bool lead_ = true;  // the one rank that writes logs, checkpoints and progress
  uint64_t start_step_ = 0, total_ = 0, tokens_per_step_ = 0;
  LrSchedule schedule_{};
  RunOutputs outputs_;  // where this run writes (lib/train/run_outputs.h)
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
  try {
    return state_->run();
  } catch (const std::bad_alloc&) {
    throw OutOfMemory("out of memory while " + state_->activity());
  }
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
  const std::string& name = c_.strategy.name;
  outputs_ = run_outputs(c_);
  summary_.log_file = outputs_.log_file;
  ckpt_dir_ = outputs_.ckpt_dir;
  if (lead_) claim_outputs();
  std::optional<CheckpointInfo> resumed;
  if (!c_.resume.empty()) {
    resume_path_ = resolve_checkpoint(c_.resume);
    resumed = read_checkpoint_info(resume_path_);
  }

  {
    Activity loading(activity_, "loading the data");
    require_memory("the data", data_bytes(c_), "token streams of " + describe_data(c_),
                   available_host_memory(), "use less data or more memory");
    data_ = load_data(c_);
  }
  check_ranks_agree_on_data(comm, data_);
  check_vocabulary(data_.train, mc);
  check_vocabulary(data_.val, mc);
  check_validation_window(data_.val, c_.seq_len);
  run_config_ = c_.to_json(world_);
  add_data_fingerprint(run_config_, data_);
  if (resumed) check_resume_config(resume_path_, resumed->config, run_config_, c_.resume_overrides);
  if (!c_.tokenizer.empty()) {
    std::string warning;
    tokenizer_ = open_sample_tokenizer(c_.tokenizer, mc.vocab_size, c_.data, warning);
    if (lead_ && !warning.empty()) std::fprintf(stderr, "warning: %s\n", warning.c_str());
  }
  sampler_ = std::make_unique<BatchSampler>(data_.train, c_.seq_len, c_.seed);
  if (!data_.val.tokens.empty()) eval_ = std::make_unique<EvalWindows>(data_.val, c_.seq_len);

  backend_ = make_backend(c_.device, c_.threads);
  if (c_.mem_limit_bytes > 0) backend_->set_memory_limit(c_.mem_limit_bytes);
  provenance_ = {
      {"build", build_facts()}, {"host", host_facts()}, {"backend", backend_->description()},
      {"comm", comm.name()},    {"world_size", world_}, {"recompute", c_.recompute}};
  check_model_memory();
  {
    Activity allocating(activity_, "allocating the model and optimizer");
    model_ = std::make_unique<GPT>(*backend_, mc, c_.strategy.weights(), c_.strategy.compute,
                                   c_.strategy.grads());
    model_->set_timers(&timers_);
    model_->set_recompute(c_.recompute == "layer");
    if (c_.sync_phases) timers_.set_sync([this] { backend_->synchronize(); });
    model_->init_weights(c_.seed);
    // Before the optimizer, whose master weights start as the model's.
    if (!c_.init_from.empty() && c_.resume.empty()) load_hf_gpt2(c_.init_from, *model_);
    dp_ = std::make_unique<DataParallel>(comm, *model_, c_.zero, c_.grad_accum, &timers_);
    optimizer_ = std::make_unique<Optimizer>(*model_, c_.strategy, sr_seed_of_rank(c_, rank_),
                                             dp_->optimizer_begin(), dp_->optimizer_end());
  }
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
  open_log(mc);
  progress_ = std::make_unique<Progress>(lead_ && !c_.quiet, name, total_);
  inputs_.resize(size_t(c_.batch) * c_.seq_len);
  targets_.resize(inputs_.size());
}

// Every output place is created and checked writable, and owned by this
// process for the run's life, before any work: an unwritable --ckpt-dir is
// found in the first second, and two runs never share a folder.
void Trainer::State::claim_outputs() {
  prepare_output_dir("--out", c_.out_dir);
  prepare_output_dir(outputs_.ckpt_flag, ckpt_dir_);
  locks_.push_back(DirLock::acquire(c_.out_dir, "--out"));
  locks_.push_back(DirLock::acquire(ckpt_dir_, outputs_.ckpt_flag));
  // Owned now: temporaries left here were a killed writer's.
  remove_atomic_temporaries(ckpt_dir_);
  // The log (its own lock: a --log outside --out is not covered by the above),
  // never a checkpoint's name or a file in another run's folder.
  check_log_output(outputs_);
  const std::filesystem::path log_dir = std::filesystem::path(summary_.log_file).parent_path();
  std::error_code ec;
  if (!std::filesystem::exists(summary_.log_file, ec)) {
    prepare_output_dir(outputs_.log_flag, log_dir.empty() ? "." : log_dir.string());
  }
  log_ = std::make_unique<RunLog>(summary_.log_file, lead_);
}

// The backend's buffers (the memory model's exact figure) and, on the host, the
// copy a checkpoint stages, against what the device and the host have left.
void Trainer::State::check_model_memory() {
  const MemoryEstimate e = run_memory_estimate(c_, world_);
  const uint64_t staging = lead_ ? checkpoint_staging_bytes(e, world_, c_.zero) : 0;
  // With --init-from the model's size comes from its config.json: named, as the file to change.
  const std::string advice = c_.init_from.empty()
                                 ? "reduce --batch or --seq-len, or use a smaller model"
                                 : "reduce --batch or --seq-len, or use a smaller model than " +
                                       hf_config_path(c_.init_from) + " describes";
  if (backend_->kind() == DeviceKind::kCpu) {
    require_memory("this run on the CPU", uint64_t(e.total()) + staging,
                   describe_estimate(e) + ", checkpoint staging " + human_bytes(staging),
                   backend_->available_memory(), advice);
    return;
  }
  require_memory("this run on " + backend_->name(), e.backend_total(), describe_estimate(e),
                 backend_->available_memory(), advice);
  require_memory("the host copy of a checkpoint", staging, "", available_host_memory(),
                 "use a machine with more host memory");
}

// A fresh run starts its log with the config; a resumed one cuts the log back
// to the checkpointed step and says so, so the records read as one run.
void Trainer::State::open_log(const GPTConfig& mc) {
  if (!log_) log_ = std::make_unique<RunLog>(summary_.log_file, lead_);  // a non-lead rank
  nlohmann::json resume_record;
  const LogCut cut = log_->begin(start_step_);
  if (start_step_ > 0 && lead_) {
    resume_record = {{"type", "resume"},
                     {"step", start_step_},
                     {"checkpoint", resume_path_},
                     {"dropped_records", cut.dropped_records},
                     {"dropped_incomplete_line", cut.dropped_incomplete_line}};
    if (cut.kept_records == 0) resume_record["log_started_here"] = true;
  }
  const bool started_here = resume_record.is_object() && resume_record.contains("log_started_here");
  if (start_step_ == 0 || started_here) {
    log_->write({{"type", "config"},
                 {"strategy", c_.strategy.name},
                 {"strategy_detail", c_.strategy.describe()},
                 {"model", mc.describe()},
                 {"backend", backend_->description()},
                 {"comm", comm_->name()},
                 {"world_size", world_},
                 {"config", run_config_},
                 {"provenance", provenance_}});
  }
  if (!resume_record.is_null()) log_->write(resume_record);
}

void Trainer::State::resume() {
  if (resume_path_.empty()) return;
  const CheckpointInfo info = load_checkpoint(resume_path_, *model_, *optimizer_);
  if (info.seed != c_.seed) {
    throw std::invalid_argument("--resume: checkpoint " + resume_path_ + " was written with seed " +
                                std::to_string(info.seed) + ", this run has --seed " +
                                std::to_string(c_.seed));
  }
  start_step_ = info.step;
  if (!c_.quiet && lead_) {
    std::fprintf(stderr, "resumed from %s at step %llu\n", resume_path_.c_str(),
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
               {"erased_frac", erased_fraction(tel)},
               {"m_stalled_frac", tel.n ? double(tel.m_stalled) / double(tel.n) : 0},
               {"v_stalled_frac", tel.n ? double(tel.v_stalled) / double(tel.n) : 0},
               {"groups", groups_json(t.groups)},
               {"tokens", step * tokens_per_step_},
               {"ms", seconds * 1e3},
               {"comm_ms", comm_seconds * 1e3},
               {"tok_per_s", double(tokens_per_step_) / seconds}});
}

bool Trainer::State::evaluate(uint64_t step) {
  if (!eval_) return true;
  ScopedPhase phase(&timers_, "eval");
  Activity evaluating(activity_, "evaluating");
  // Batch i of the evaluation windows goes to rank i % W, and the per-batch
  // sums are added in batch order, as one rank would. A stop signal ends this
  // rank's share early; the last gathered slot carries it to every rank.
  const int W = world_;
  const size_t B = size_t(c_.batch);
  const size_t windows = std::min<size_t>(eval_->count(), size_t(c_.eval_batches) * B);
  const size_t batches = (windows + B - 1) / B, per_rank = (batches + W - 1) / size_t(W);
  std::vector<double> mine(per_rank + 1, 0.0);
  for (size_t i = size_t(rank_); i < batches && stop_signal() == 0; i += size_t(W)) {
    const int rows = int(std::min(B, windows - i * B));
    eval_->fill(i * B, rows, inputs_.data(), targets_.data());
    mine[i / W] = double(model_->forward(inputs_.data(), targets_.data(), rows, c_.seq_len)) * rows;
  }
  mine[per_rank] = double(stop_signal());
  const auto all = dp_->all_gather(mine);
  for (const std::vector<double>& rank : all) {
    if (rank[per_rank] != 0.0) {
      mark_interrupted(int(rank[per_rank]));
      return false;
    }
  }
  double sum = 0.0;
  for (size_t i = 0; i < batches; ++i) sum += all[i % W][i / W];
  summary_.val_loss = sum / double(windows);
  summary_.val_ppl = std::exp(summary_.val_loss);
  log_->write({{"type", "eval"},
               {"step", step},
               {"val_loss", summary_.val_loss},
               {"val_ppl", summary_.val_ppl}});
  return true;
}

void Trainer::State::mark_interrupted(int signal) {
  if (summary_.interrupted) return;
  summary_.interrupted = true;
  summary_.stop_signal = signal;
}

void Trainer::State::check_log(uint64_t step) {
  if (!log_->failed()) return;
  if (saved_step_ != step) save(step);
  throw std::runtime_error(log_->error() + "; stopped after step " + std::to_string(step) +
                           " (checkpoint " + summary_.checkpoint + ")");
}

void Trainer::State::save(uint64_t step) {
  ScopedPhase phase(&timers_, "checkpoint");
  Activity saving(activity_, "writing a checkpoint");
  const std::vector<HostStateBuffer> state = dp_->gather_optimizer_state(*optimizer_);
  const std::string path = checkpoint_path(ckpt_dir_, step);
  if (lead_) {
    CheckpointInfo info;
    info.step = step;
    info.data_cursor = step;
    info.seed = c_.seed;
    info.strategy = c_.strategy.name;
    info.config = run_config_;
    info.provenance = provenance_;
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
    Activity training(activity_, "training (step " + std::to_string(step) + ")");
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
    check_log(step);
    // Every rank saw the same signal in the step's exchange (or the
    // evaluation's gather), so all stop after this step.
    if (t.stop_signal != 0) mark_interrupted(t.stop_signal);
    if (summary_.interrupted) {
      if (saved_step_ != step) save(step);
      report_stop();
      break;
    }
  }
  if (steps_run > 0) {
    const BackendCounters now = backend_->counters();
    summary_.allocations_after_first_step = now.allocations - after_first.allocations;
    summary_.host_reads_after_first_step = now.host_reads - after_first.host_reads;
  }
  finish();
  check_log(summary_.steps_done);
  return summary_;
}

void Trainer::State::report_stop() {
  if (!lead_) return;  // also under --quiet: the user needs to know where the run stands
  progress_->end_line();
  std::fprintf(stderr, "[%s] stopped by signal %d at step %llu; checkpoint %s\n",
               summary_.strategy.c_str(), summary_.stop_signal,
               static_cast<unsigned long long>(summary_.steps_done),
               summary_.checkpoint.empty() ? "none" : summary_.checkpoint.c_str());
}

void Trainer::State::finish() {
  if (!summary_.interrupted) {
    // A signal during the final evaluation skips the rest of it; the
    // checkpoint of the finished steps is still written.
    const bool evaluated = !c_.final_eval || evaluate(summary_.steps_done);
    // Also when no step ran (resumed at the last step): the checkpoint then
    // passes the state on, e.g. to another world size.
    if ((c_.save_final || !evaluated) && saved_step_ != summary_.steps_done) {
      save(summary_.steps_done);
    }
    if (!evaluated) report_stop();
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
    try {
      const std::vector<int32_t> out =
          generate(*model_, prompt, c_.sample_tokens, c_.seq_len, c_.seed);
      summary_.sample = tokens_to_text(out, model_->config().vocab_size, tokenizer_.get());
    } catch (const Interrupted& e) {  // the checkpoint is written; only the sample is lost
      mark_interrupted(e.signal);
      report_stop();
    }
  }
  summary_.phases = timers_;
  nlohmann::json phases;
  for (const auto& [name, stat] : timers_.stats()) {
    phases[name] = {{"seconds", stat.seconds}, {"calls", stat.calls}};
  }
  log_->write({{"type", "summary"}, {"summary", summary_.to_json()}, {"phases", phases}});
}

}  // namespace srkit

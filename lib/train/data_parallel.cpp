#include "lib/train/data_parallel.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>

namespace srkit {
namespace {

constexpr const char* kCommPhase = "communication";

// A device buffer for staging, released on every path out (collectives may throw).
class Scratch {
 public:
  Scratch(Backend& backend, size_t bytes)
      : backend_(backend),
        ptr_(backend.allocate(std::max<size_t>(bytes, 1), MemCategory::kScratch)) {}
  ~Scratch() { backend_.release(ptr_); }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  char* get() const { return static_cast<char*>(ptr_); }

 private:
  Backend& backend_;
  void* ptr_;
};

// Collectives move opaque elements of 2 or 4 bytes; gathers never interpret them.
DType opaque_dtype(size_t element_bytes) { return element_bytes == 4 ? DType::kF32 : DType::kBF16; }

}  // namespace

DataParallel::DataParallel(Communicator& comm, GPT& model, int zero, int grad_accum,
                           PhaseTimers* timers)
    : comm_(comm),
      model_(model),
      backend_(model.backend()),
      zero_(zero),
      accum_(grad_accum),
      plan_(model.layout().total_size(), comm.world_size()),
      timers_(timers) {
  if (grad_accum < 1) throw std::invalid_argument("--grad-accum must be >= 1");
  for (const ParamGroupRange& r : model.layout().group_ranges()) slot_groups_.push_back(r.group);
  comm_.use_stream(backend_.native_stream());
  step_bytes_ = step_buffer_bytes(world(), grad_accum, slot_groups_.size());
  step_buffer_ = backend_.allocate(step_bytes_, MemCategory::kScratch);
  step_host_.resize(step_bytes_);
}

DataParallel::~DataParallel() { backend_.release(step_buffer_); }

size_t DataParallel::step_buffer_bytes(int world, int grad_accum, size_t telemetry_slots) {
  // W records, then the clip and W blocks of telemetry slots, all on 8-byte boundaries.
  return size_t(world) * StepRecord::doubles(grad_accum) * sizeof(double) + sizeof(GradClip) +
         size_t(world) * telemetry_slots * sizeof(AdamWTelemetry);
}

size_t DataParallel::optimizer_begin() const { return zero_ ? plan_.begin(rank()) : 0; }
size_t DataParallel::optimizer_end() const { return zero_ ? plan_.end(rank()) : plan_.total(); }

size_t DataParallel::record_doubles() const { return StepRecord::doubles(accum_); }
double* DataParallel::records() const { return static_cast<double*>(step_buffer_); }
double* DataParallel::own_record() const { return records() + size_t(rank()) * record_doubles(); }
GradClip* DataParallel::clip() const {
  return reinterpret_cast<GradClip*>(records() + size_t(world()) * record_doubles());
}
AdamWTelemetry* DataParallel::telemetry(int q) const {
  return reinterpret_cast<AdamWTelemetry*>(clip() + 1) + size_t(q) * slot_groups_.size();
}

double* DataParallel::loss_slot(int k) { return own_record() + StepRecord::kLoss0 + size_t(k); }
AdamWTelemetry* DataParallel::telemetry_slot() { return telemetry(rank()); }

void DataParallel::reduce_gradients() {
  if (world() == 1) return;  // one contribution: the sum is the identity
  ScopedPhase phase(timers_, kCommPhase);
  const DType dt = model_.grad_dtype();
  const size_t es = dtype_size(dt);
  char* g = static_cast<char*>(model_.grads());
  if (!zero_) {
    comm_.all_reduce(g, plan_.total(), dt, ReduceOp::kSum);
    return;
  }
  comm_.reduce_scatter(g, g + plan_.begin(rank()) * es, plan_.bulk(), dt, ReduceOp::kSum);
  if (plan_.tail() > 0) {
    // Reduced on every rank (it is short); only the last rank's shard uses it.
    comm_.all_reduce(g + plan_.bulk_total() * es, plan_.tail(), dt, ReduceOp::kSum);
  }
}

const GradClip* DataParallel::exchange(int stop_signal, float max_norm) {
  const DType dt = model_.grad_dtype();
  const size_t begin = plan_.begin(rank()), end = plan_.end(rank());
  double* mine = own_record();
  backend_.sum_squares(dt, static_cast<char*>(model_.grads()) + begin * dtype_size(dt), end - begin,
                       mine + StepRecord::kSumSq);
  const double signal = double(stop_signal);
  backend_.copy_to_device(mine + StepRecord::kSignal, &signal, sizeof signal);
  if (world() > 1) {
    ScopedPhase phase(timers_, kCommPhase);
    // In place; a double travels as two opaque 4-byte elements.
    comm_.all_gather(mine, records(), 2 * record_doubles(), DType::kF32);
  }
  backend_.grad_clip(records(), world(), accum_, max_norm, clip());
  return clip();
}

DataParallel::StepTotals DataParallel::finish_step(bool with_telemetry) {
  gather_weights();
  const bool gather_telemetry = with_telemetry && zero_ && world() > 1;
  if (gather_telemetry) {
    ScopedPhase phase(timers_, kCommPhase);
    static_assert(sizeof(AdamWTelemetry) % 4 == 0, "telemetry travels as 4-byte elements");
    comm_.all_gather(telemetry(rank()), telemetry(0),
                     slot_groups_.size() * sizeof(AdamWTelemetry) / 4, DType::kF32);
  }
  backend_.copy_to_host(step_host_.data(), step_buffer_, step_bytes_);

  const size_t stride = record_doubles();
  const auto* rec = reinterpret_cast<const double*>(step_host_.data());
  GradClip c;
  std::memcpy(&c, step_host_.data() + size_t(world()) * stride * sizeof(double), sizeof c);
  StepTotals t;
  t.grad_norm = c.norm;
  t.clip_scale = c.scale;
  t.finite = c.ok != 0;
  const double global_micro_batches = double(accum_) * world();
  for (int k = 0; k < accum_; ++k) {  // global micro-batch k * W + q
    for (int q = 0; q < world(); ++q) {
      t.loss += rec[size_t(q) * stride + StepRecord::kLoss0 + size_t(k)] / global_micro_batches;
    }
  }
  for (int q = 0; q < world(); ++q) {
    t.stop_signal = std::max(t.stop_signal, int(rec[size_t(q) * stride + StepRecord::kSignal]));
  }
  if (with_telemetry) {
    const char* tel = step_host_.data() + size_t(world()) * stride * sizeof(double) + sizeof c;
    // Plain data parallel: every rank stepped the whole buffer, its own sums are
    // the total. ZeRO-1: the shards' sums, added in rank order. Within a rank,
    // the group ranges' sums in buffer order.
    const int first = gather_telemetry ? 0 : rank(), last = gather_telemetry ? world() : rank() + 1;
    const size_t slots = slot_groups_.size();
    for (int q = first; q < last; ++q) {
      for (size_t r = 0; r < slots; ++r) {
        AdamWTelemetry part;
        std::memcpy(&part, tel + (size_t(q) * slots + r) * sizeof part, sizeof part);
        add_telemetry(t.groups[size_t(slot_groups_[r])], part);
        add_telemetry(t.telemetry, part);
      }
    }
  }
  return t;
}

void DataParallel::gather_weights() {
  if (!zero_ || world() == 1) return;
  ScopedPhase phase(timers_, kCommPhase);
  const DType dt = model_.dtype();
  const size_t es = dtype_size(dt);
  char* w = static_cast<char*>(model_.weights());
  comm_.all_gather(w + plan_.begin(rank()) * es, w, plan_.bulk(), dt);
  if (plan_.tail() > 0) {
    comm_.broadcast(w + plan_.bulk_total() * es, plan_.tail() * es, world() - 1);
  }
}

std::vector<std::vector<double>> DataParallel::all_gather(const std::vector<double>& mine) {
  if (world() == 1) return {mine};  // nothing to exchange (and no "communication" phase)
  const size_t W = size_t(world()), n = mine.size(), bytes = n * sizeof(double);
  std::vector<double> all(W * n);
  {
    ScopedPhase phase(timers_, kCommPhase);
    Scratch buf(backend_, W * bytes);
    char* own = buf.get() + size_t(rank()) * bytes;
    backend_.copy_to_device(own, mine.data(), bytes);
    // A double travels as two opaque 4-byte elements.
    comm_.all_gather(own, buf.get(), 2 * n, DType::kF32);
    backend_.copy_to_host(all.data(), buf.get(), W * bytes);
  }
  std::vector<std::vector<double>> out(W);
  for (size_t q = 0; q < W; ++q) out[q].assign(all.begin() + q * n, all.begin() + (q + 1) * n);
  return out;
}

std::vector<HostStateBuffer> DataParallel::gather_optimizer_state(const Optimizer& optimizer) {
  if (!zero_ || world() == 1) {
    return rank() == 0 ? optimizer_state_to_host(optimizer) : std::vector<HostStateBuffer>{};
  }
  ScopedPhase phase(timers_, kCommPhase);
  const size_t begin = optimizer.begin(), n = optimizer.end() - begin, total = plan_.total();
  std::vector<HostStateBuffer> out;
  // One buffer at a time: the transient cost is one whole state buffer.
  for (const Optimizer::StateBuffer& s : optimizer.state_buffers()) {
    const size_t es = s.bytes / n;
    Scratch whole(backend_, total * es);
    backend_.copy(whole.get() + begin * es, s.data, s.bytes);
    comm_.all_gather(whole.get() + begin * es, whole.get(), plan_.bulk(), opaque_dtype(es));
    if (plan_.tail() > 0) {
      comm_.broadcast(whole.get() + plan_.bulk_total() * es, plan_.tail() * es, world() - 1);
    }
    if (rank() == 0) {
      HostStateBuffer h{s.name, s.dtype, std::vector<char>(total * es)};
      backend_.copy_to_host(h.bytes.data(), whole.get(), h.bytes.size());
      out.push_back(std::move(h));
    }
  }
  return out;
}

DataParallel::ReplicaReport DataParallel::check_replicas() {
  const DType dt = model_.dtype();
  const size_t bytes = model_.weight_bytes(), n = model_.layout().total_size();
  std::vector<char> mine(bytes);
  uint64_t h;
  {
    ScopedPhase phase(timers_, "replica_check");
    backend_.copy_to_host(mine.data(), model_.weights(), bytes);
    h = checksum_bytes(mine.data(), bytes);
  }
  // Halves of 32 bits are exact in a double.
  const auto sums = all_gather({double(h >> 32), double(h & 0xffffffffu)});
  ReplicaReport report;
  report.identical =
      std::all_of(sums.begin(), sums.end(), [&](const auto& s) { return s == sums[0]; });
  if (report.identical) return report;

  std::vector<char> reference(bytes);
  {
    ScopedPhase phase(timers_, kCommPhase);
    Scratch buf(backend_, bytes);
    if (rank() == 0) backend_.copy(buf.get(), model_.weights(), bytes);
    comm_.broadcast(buf.get(), bytes, 0);
    backend_.copy_to_host(reference.data(), buf.get(), bytes);
  }
  UlpDivergence d;
  {
    ScopedPhase phase(timers_, "replica_check");
    d = ulp_divergence(dt, mine.data(), reference.data(), n);
  }
  const auto all = all_gather({double(d.differing), double(d.max_ulps), double(d.max_index)});
  for (int q = 0; q < world(); ++q) {
    UlpDivergence u;
    u.differing = uint64_t(all[q][0]);
    u.max_ulps = uint64_t(all[q][1]);
    u.max_index = size_t(all[q][2]);
    report.vs_rank0.push_back(u);
    if (u.max_ulps > report.vs_rank0[report.worst_rank].max_ulps) report.worst_rank = q;
  }
  return report;
}

}  // namespace srkit

#include "lib/train/data_parallel.h"

#include <algorithm>
#include <cmath>

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

DataParallel::DataParallel(Communicator& comm, GPT& model, int zero, PhaseTimers* timers)
    : comm_(comm),
      model_(model),
      backend_(model.backend()),
      zero_(zero),
      plan_(model.layout().total_size(), comm.world_size()),
      timers_(timers) {}

size_t DataParallel::optimizer_begin() const { return zero_ ? plan_.begin(rank()) : 0; }
size_t DataParallel::optimizer_end() const { return zero_ ? plan_.end(rank()) : plan_.total(); }

void DataParallel::reduce_gradients() {
  if (world() == 1) return;  // one contribution: the sum is the identity
  ScopedPhase phase(timers_, kCommPhase);
  const DType dt = model_.dtype();
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

double DataParallel::shard_grad_sumsq() {
  const DType dt = model_.dtype();
  const size_t begin = plan_.begin(rank()), end = plan_.end(rank());
  return backend_.sum_squares(dt, static_cast<char*>(model_.grads()) + begin * dtype_size(dt),
                              end - begin);
}

DataParallel::StepTotals DataParallel::exchange_step(const std::vector<double>& micro_losses,
                                                     double shard_sumsq, int stop_signal) {
  std::vector<double> record{double(stop_signal), shard_sumsq};
  record.insert(record.end(), micro_losses.begin(), micro_losses.end());
  const std::vector<std::vector<double>> all = all_gather(record);
  const size_t A = micro_losses.size();
  const double global_micro_batches = double(A) * world();
  StepTotals t;
  double sumsq = 0.0;
  for (size_t k = 0; k < A; ++k) {
    for (int q = 0; q < world(); ++q) t.loss += all[q][2 + k] / global_micro_batches;
  }
  for (int q = 0; q < world(); ++q) {
    t.stop_signal = std::max(t.stop_signal, int(all[q][0]));
    sumsq += all[q][1];
  }
  t.grad_norm = std::sqrt(sumsq);
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

AdamWTelemetry DataParallel::combine(const AdamWTelemetry& t) {
  if (!zero_ || world() == 1) return t;
  // Counts stay exact as doubles (< 2^53).
  const auto all = all_gather({t.update_sq, t.weight_sq, double(t.n), double(t.nonzero),
                               double(t.erased), double(t.m_stalled), double(t.v_stalled)});
  AdamWTelemetry out;
  for (const std::vector<double>& q : all) {
    out.update_sq += q[0];
    out.weight_sq += q[1];
    out.n += uint64_t(q[2]);
    out.nonzero += uint64_t(q[3]);
    out.erased += uint64_t(q[4]);
    out.m_stalled += uint64_t(q[5]);
    out.v_stalled += uint64_t(q[6]);
  }
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

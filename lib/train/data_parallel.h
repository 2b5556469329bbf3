// The communication of data-parallel training, plain (every rank steps the
// whole optimizer) or ZeRO-1 (each rank steps its shard of the flat buffer and
// holds optimizer state only for it). With one rank every collective is the
// identity and the run is exactly the single-process one.
//
// Why replicas stay bit-identical (docs/architecture.md, "shared randomness"): after
// reduce_gradients() every rank holds the same bits of the reduced gradients
// (the communicator distributes one rank-order sum), the gradient norm is
// combined from the same per-shard partial sums in rank order on every rank, and
// the SR bits of an element depend only on (seed, step, global index). So every
// rank, or the one rank owning a shard, computes the same new weights. ZeRO-1 and
// plain data parallel give the same bits as each other for the same reason: each
// element sees the same reduction and the same update.
//
// Buffers handed to the communicator are the backend's device buffers (host
// scalars are staged through a small device buffer), so the same code drives the
// MPI communicator on CPU ranks and NCCL on GPU ranks. The per-step values
// (losses, gradient norm, clip, telemetry, stop signal) travel as one device
// record per rank and reach the host once per step, after the optimizer.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "lib/comm/communicator.h"
#include "lib/model/gpt.h"
#include "lib/profiling.h"
#include "lib/train/checkpoint_io.h"
#include "lib/train/group_telemetry.h"
#include "lib/train/optimizer.h"
#include "lib/train/replica_check.h"
#include "lib/train/shard_plan.h"

namespace srkit {

class DataParallel {
 public:
  // zero: 0 = plain data parallel, 1 = ZeRO-1. grad_accum: micro-batches per
  // optimizer step (the size of the step record). timers gets a "communication"
  // phase for every collective (may be null). Allocates the step record once.
  DataParallel(Communicator& comm, GPT& model, int zero, int grad_accum, PhaseTimers* timers);
  ~DataParallel();
  DataParallel(const DataParallel&) = delete;
  DataParallel& operator=(const DataParallel&) = delete;

  int rank() const { return comm_.rank(); }
  int world() const { return comm_.world_size(); }
  int zero() const { return zero_; }
  const ShardPlan& plan() const { return plan_; }
  // The range of the flat buffer this rank's optimizer steps: its shard under
  // ZeRO-1, the whole buffer otherwise.
  size_t optimizer_begin() const;
  size_t optimizer_end() const;

  // ---- one optimizer step, on the device (kernels/common/step_record.h) ----
  // The device double that receives micro-batch k's mean loss.
  double* loss_slot(int k);
  // After every micro-batch's backward: sums the gradients over the ranks (rank
  // order, fp32, rounded once to the gradient dtype). Plain: the whole buffer on
  // every rank. ZeRO-1: only this rank's shard is reduced (reduce-scatter); the
  // rest of the buffer keeps this rank's own unreduced gradients.
  void reduce_gradients();
  // Writes this rank's stop signal (0: none) and the sum of squares of its shard
  // of the reduced gradients into its record (plain data parallel uses the same
  // shards, so both modes combine the same partials into the norm), exchanges
  // the records (a collective) and derives the clip from them: the returned
  // device GradClip is what the optimizer consumes. No host read.
  const GradClip* exchange(int stop_signal, float max_norm);
  // The device telemetry this rank's optimizer fills on logging steps: one
  // slot per group range of the layout (Optimizer::step).
  AdamWTelemetry* telemetry_slot();

  // After the optimizer step: ZeRO-1's weight gather (every rank gets every
  // shard), with telemetry ZeRO-1's telemetry gather, then the step's one host
  // read. Every rank gets the same totals.
  struct StepTotals {
    double loss = 0.0;       // mean over the global batch, added in global micro-batch order
    double grad_norm = 0.0;  // root of the shard sums, added in rank order
    float clip_scale = 1.0f;
    bool finite = true;          // loss and gradient norm finite (else the optimizer did nothing)
    int stop_signal = 0;         // the largest signal any rank saw
    AdamWTelemetry telemetry{};  // the whole buffer's (with_telemetry only)
    GroupTelemetry groups{};     // per tensor group (with_telemetry only); they add up to it
  };
  StepTotals finish_step(bool with_telemetry);

  // Every rank's `mine` (the same length on every rank), in rank order.
  std::vector<std::vector<double>> all_gather(const std::vector<double>& mine);

  // The optimizer's state over the whole flat buffer on rank 0 (gathered from
  // the shards under ZeRO-1; a collective then). Other ranks get an empty vector.
  std::vector<HostStateBuffer> gather_optimizer_state(const Optimizer& optimizer);

  // Replica audit: compares checksums of every rank's weights; if they differ,
  // measures each rank's divergence from rank 0 in ulps. Same result on every rank.
  struct ReplicaReport {
    bool identical = true;
    std::vector<UlpDivergence> vs_rank0;  // per rank (empty when identical)
    int worst_rank = 0;                   // rank with the largest max_ulps
  };
  ReplicaReport check_replicas();

  Communicator& comm() { return comm_; }

  // Bytes of the step record a rank allocates (scratch): W records, the clip and
  // W blocks of telemetry_slots telemetry slots (ParamLayout::group_ranges().size()).
  static size_t step_buffer_bytes(int world, int grad_accum, size_t telemetry_slots);

 private:
  void gather_weights();
  // Layout of the step buffer: W records, the clip, W blocks of telemetry slots.
  size_t record_doubles() const;
  double* records() const;
  double* own_record() const;
  GradClip* clip() const;
  AdamWTelemetry* telemetry(int rank) const;  // the rank's block of slots

  Communicator& comm_;
  GPT& model_;
  Backend& backend_;
  int zero_;
  int accum_;
  ShardPlan plan_;
  std::vector<ParamGroup> slot_groups_;  // the group of each telemetry slot
  PhaseTimers* timers_;
  void* step_buffer_ = nullptr;  // device
  size_t step_bytes_ = 0;
  std::vector<char> step_host_;  // its host mirror, read once per step
};

}  // namespace srkit

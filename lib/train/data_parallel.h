// The communication of data-parallel training, plain (every rank steps the
// whole optimizer) or ZeRO-1 (each rank steps its shard of the flat buffer and
// holds optimizer state only for it). With one rank every collective is the
// identity and the run is exactly the single-process one.
//
// Why replicas stay bit-identical (DESIGN.md, "shared randomness"): after
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
// MPI communicator on CPU ranks and NCCL on GPU ranks.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "lib/comm/communicator.h"
#include "lib/model/gpt.h"
#include "lib/profiling.h"
#include "lib/train/checkpoint_io.h"
#include "lib/train/optimizer.h"
#include "lib/train/replica_check.h"
#include "lib/train/shard_plan.h"

namespace srkit {

class DataParallel {
 public:
  // zero: 0 = plain data parallel, 1 = ZeRO-1. timers gets a "communication"
  // phase for every collective (may be null).
  DataParallel(Communicator& comm, GPT& model, int zero, PhaseTimers* timers);

  int rank() const { return comm_.rank(); }
  int world() const { return comm_.world_size(); }
  int zero() const { return zero_; }
  const ShardPlan& plan() const { return plan_; }
  // The range of the flat buffer this rank's optimizer steps: its shard under
  // ZeRO-1, the whole buffer otherwise.
  size_t optimizer_begin() const;
  size_t optimizer_end() const;

  // After every micro-batch's backward: sums the gradients over the ranks (rank
  // order, fp32, rounded once to the gradient dtype). Plain: the whole buffer on
  // every rank. ZeRO-1: only this rank's shard is reduced (reduce-scatter); the
  // rest of the buffer keeps this rank's own unreduced gradients.
  void reduce_gradients();
  // This rank's partial sum of squares of the reduced gradients over its shard
  // (plain data parallel uses the same shards, so both modes combine the same
  // partials into the norm).
  double shard_grad_sumsq();
  // The one small exchange of every step. Each rank gives its micro-batch
  // losses (micro-batch k of rank r is global micro-batch k * W + r), its
  // shard_grad_sumsq() and the stop signal it saw (0: none); every rank gets the
  // same totals.
  struct StepTotals {
    double loss = 0.0;       // mean over the global batch, added in global micro-batch order
    double grad_norm = 0.0;  // root of the shard sums, added in rank order
    int stop_signal = 0;     // the largest signal any rank saw
  };
  StepTotals exchange_step(const std::vector<double>& micro_losses, double shard_sumsq,
                           int stop_signal);

  // ZeRO-1, after the shard's optimizer step: every rank gets every shard's
  // weights. Plain: nothing to do.
  void gather_weights();

  // The optimizer telemetry of the whole buffer: under ZeRO-1 the shards' sums
  // added in rank order (a collective); otherwise t itself.
  AdamWTelemetry combine(const AdamWTelemetry& t);

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

 private:
  Communicator& comm_;
  GPT& model_;
  Backend& backend_;
  int zero_;
  ShardPlan plan_;
  PhaseTimers* timers_;
};

}  // namespace srkit

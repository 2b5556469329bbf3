// Communicators: the one interface the trainer uses for data parallelism and
// ZeRO-1, whatever carries the bytes (nothing, MPI between CPU ranks, NCCL
// between GPUs). lib/comm/ holds the interface (here), the implementations
// (single_, mpi_, nccl_communicator) and the factory (make_communicator.cpp).
//
// Shared randomness (docs/architecture.md) needs every replica to hold the same bits after
// a reduction, so reductions here are not "whatever the library does": the CPU
// implementations sum in rank order in fp32 (reduce_in_rank_order below) and
// then distribute one copy of each reduced block, which is bit-identical on every
// rank by construction.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>

#include "kernels/common/dtype.h"
#include "kernels/cuda/stream.h"

namespace srkit {

enum class ReduceOp { kSum, kMean };

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual std::string name() const = 0;  // "single", "mpi", "nccl"
  virtual int rank() const = 0;
  virtual int world_size() const = 0;
  virtual int local_rank() const = 0;  // rank within the node (GPU selection)

  // In place over n elements of dtype.
  virtual void all_reduce(void* buf, size_t n, DType dtype, ReduceOp op) = 0;
  // send holds world_size * count elements; rank r receives the reduction of block r.
  // In place: recv may be send + rank * count elements.
  virtual void reduce_scatter(const void* send, void* recv, size_t count, DType dtype,
                              ReduceOp op) = 0;
  // send holds count elements; recv gets world_size * count, rank order.
  // In place: send may be recv + rank * count elements.
  virtual void all_gather(const void* send, void* recv, size_t count, DType dtype) = 0;
  virtual void broadcast(void* buf, size_t bytes, int root) = 0;
  virtual void barrier() = 0;
  // Start-up check: every rank passes a description (e.g. the model + strategy
  // JSON); throws std::runtime_error with a one-line message, on every rank,
  // naming the first rank whose value differs from rank 0's.
  virtual void check_same_on_all_ranks(const std::string& what, const std::string& value) = 0;

  // Orders this communicator's collectives after a device backend's work: from
  // now on they are issued on `stream` (after the work already queued there,
  // never by a device-wide synchronise), and each still returns once its result
  // is in place. The stream must outlive its use here. CPU communicators have
  // no device work to order and ignore it.
  virtual void use_stream(cuda::Stream stream) { static_cast<void>(stream); }

  // Wall time spent inside collectives so far.
  double comm_seconds() const { return comm_seconds_; }

 protected:
  // RAII: adds the wall time of its scope to comm_seconds().
  class Timed {
   public:
    explicit Timed(Communicator* c);
    ~Timed();
    Timed(const Timed&) = delete;
    Timed& operator=(const Timed&) = delete;

   private:
    Communicator* c_;
    double start_;
  };

 private:
  double comm_seconds_ = 0.0;
};

// The reduction rule of the CPU communicators, exposed so that tests can hold it
// and every implementation shares one body. parts[0..nparts-1] each hold n
// elements of dtype, parts[q] being rank q's contribution. For every element:
//   s   = (((x_0 + x_1) + x_2) + ... + x_{W-1})   fp32 adds, rank order, bf16 widened exactly
//   out = s                    (kSum)
//   out = s * (1.0f / W)       (kMean; 1/W rounded to fp32 first, then one fp32 multiply)
// and a bf16 out is rounded to nearest-even once, from that fp32 value. W is nparts.
// out may alias any part: each tile of outputs is written after all its inputs are read.
void reduce_in_rank_order(const void* const* parts, int nparts, void* out, size_t n, DType dtype,
                          ReduceOp op);

// The waiting schedule of the MPI and NCCL communicators, which poll non-blocking
// operations against a deadline. A short window of polling with yields keeps small
// collectives at library latency (some transports move data only inside the
// library's calls); after it the waiter sleeps, doubling the nap from 20 us up to
// 1 ms, and goes back to 20 us whenever something completed. A rank that waits
// seconds for a straggler or a dead peer then costs about 2% of a core (measured:
// 0.05 s of CPU over a 3 s wait), and a collective ends at most ~1 ms after its
// last message arrives.
class PollBackoff {
 public:
  explicit PollBackoff(double timeout_s);  // <= 0: no deadline
  // Call after each poll that left work unfinished; progressed: part of it
  // completed. Returns false once the deadline has passed (the caller then reports
  // and aborts); otherwise pauses according to the schedule and returns true.
  bool pause(bool progressed);

 private:
  std::chrono::steady_clock::time_point start_;
  std::chrono::duration<double> timeout_;
  std::chrono::microseconds nap_;
};

// World size announced by a launcher in the environment (mpirun: OMPI_COMM_WORLD_SIZE;
// MPICH/Hydra, Intel MPI, Slurm PMI2: PMI_SIZE; MVAPICH: MV2_COMM_WORLD_SIZE; srun:
// SLURM_STEP_NUM_TASKS), or 1 when none is set. *source names the variable used.
// Throws std::invalid_argument when such a variable is not a positive integer.
int launcher_world_size(std::string* source = nullptr);

std::unique_ptr<Communicator> make_single_communicator();

// kind:
//   "auto"   MPI when a launcher announces world size > 1 (launcher_world_size), else
//            single. A launch with world size > 1 in a build without MPI throws: W
//            independent single-process runs writing the same files would be worse.
//   "single" one process, no MPI touched.
//   "mpi"    CPU ranks over MPI; throws when srkit was built without MPI.
//   "nccl"   GPU ranks over NCCL (device buffers), bootstrapped through MPI; needs
//            both CUDA and MPI in the build.
// timeout_s: every MPI/NCCL collective waits at most this long for its peers, then
// prints one line naming the collective and the missing rank(s) to stderr and
// aborts the whole job (MPI_Abort, non-zero exit on every rank). <= 0: wait forever.
std::unique_ptr<Communicator> make_communicator(const std::string& kind, double timeout_s);

}  // namespace srkit

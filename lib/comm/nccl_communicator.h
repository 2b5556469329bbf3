// GPU ranks over NCCL, one GPU per rank, bootstrapped through MPI. Built with the
// CUDA backend; usable only when MPI is built too (make_communicator("nccl", ...)).
// Plain C++ header: no CUDA or NCCL headers leak into callers.
//
// Buffers passed to the collectives are device pointers on this rank's GPU
// (cudaSetDevice(local_rank % device count) in the constructor). Collectives run
// on the stream given to use_stream() (the backend's: they start after the work
// already queued there), or until then on the communicator's own stream, created
// as a blocking stream so that it starts after work already queued on the legacy
// default stream. Every collective returns only when its result is in place; it
// waits for its stream, never for the whole device.
//
// Numerics differ from the CPU communicators: NCCL reduces in its own order (ring
// or tree, chosen per communicator and message size), for bf16 rounds partial
// sums to bf16 between steps, and a mean is NCCL's ncclAvg (its own placement of
// the 1/W scaling). That order is the same on every rank and the result of an
// all_reduce is distributed, not recomputed, so all ranks still end with
// identical bits, which is what shared randomness needs; they are not the bits of
// the CPU rank-order sum.
//
// Timeouts: NCCL runs in non-blocking mode; the host polls the stream and the
// communicator's state against the deadline, and on timeout aborts the NCCL
// communicator, prints one line and calls MPI_Abort. NCCL cannot tell which peer
// is missing, so the line says "a peer rank".
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "kernels/cuda/stream.h"
#include "lib/comm/communicator.h"
#include "lib/comm/mpi_communicator.h"

struct ncclComm;

namespace srkit {

class NcclCommunicator final : public Communicator {
 public:
  // Takes over the MPI communicator (MPI is finalised after NCCL is destroyed).
  NcclCommunicator(std::unique_ptr<MpiCommunicator> mpi, double timeout_s);
  ~NcclCommunicator() override;
  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;

  std::string name() const override { return "nccl"; }
  int rank() const override { return mpi_->rank(); }
  int world_size() const override { return mpi_->world_size(); }
  int local_rank() const override { return mpi_->local_rank(); }
  int device() const { return device_; }

  void use_stream(cuda::Stream stream) override { stream_ = stream; }

  // kMean: ncclAvg.
  void all_reduce(void* buf, size_t n, DType dtype, ReduceOp op) override;
  void reduce_scatter(const void* send, void* recv, size_t count, DType dtype,
                      ReduceOp op) override;
  void all_gather(const void* send, void* recv, size_t count, DType dtype) override;
  void broadcast(void* buf, size_t bytes, int root) override;
  void barrier() override;
  // Host strings: done over MPI.
  void check_same_on_all_ranks(const std::string& what, const std::string& value) override;

  // For host-side exchanges next to the device ones.
  MpiCommunicator& mpi() { return *mpi_; }

 private:
  // Waits until a (possibly in-progress) NCCL call has been issued.
  void wait_issued(const char* what, int nccl_result);
  // Waits until everything queued on the stream has finished.
  void wait_stream(const char* what);
  [[noreturn]] void abort_timeout(const char* what);
  void release() noexcept;  // destroys whatever the constructor created

  std::unique_ptr<MpiCommunicator> mpi_;
  double timeout_s_;
  int device_ = 0;
  ncclComm* comm_ = nullptr;
  cuda::Stream own_stream_ = nullptr;  // created here; the default for stream_
  cuda::Stream stream_ = nullptr;      // where collectives are issued
};

}  // namespace srkit

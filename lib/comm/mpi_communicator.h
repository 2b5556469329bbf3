// CPU ranks over MPI. Built only when CMake finds MPI (SRKIT_HAVE_MPI).
//
// Determinism: no floating-point MPI reduction is used. A reduction is a
// reduce-scatter by point-to-point messages (rank r receives block r from every
// rank and sums the contributions in rank order with reduce_in_rank_order) followed,
// for all_reduce, by an all-gather of the reduced blocks. The bits therefore do not
// depend on the MPI library, its algorithm choice or the network, and every rank
// ends with the same bits.
//
// Timeouts: every collective posts non-blocking sends/receives and polls them
// against a deadline (MPI_Testsome, then sleeps with a growing back-off, so a rank
// waiting for a straggler or a dead peer does not burn a core). Every exchange is
// directly between the two ranks concerned, so a rank that times out can name the
// peers it did not hear from: it prints one line to stderr and calls MPI_Abort.
//
// MPI life cycle: the constructor calls MPI_Init_thread (MPI_THREAD_FUNNELED: only
// the thread that built the communicator calls MPI) unless MPI is already
// initialised, and then that instance's destructor calls MPI_Finalize. MPI cannot be
// initialised twice, so create the first communicator once per process; further
// instances (each on its own duplicate of MPI_COMM_WORLD) must be destroyed before it.
#pragma once

#include <mpi.h>

#include <algorithm>
#include <cstddef>
#include <string>
#include <vector>

#include "lib/comm/communicator.h"

namespace srkit {

class MpiCommunicator final : public Communicator {
 public:
  // timeout_s <= 0 waits forever. Messages larger than max_message_bytes are sent
  // in pieces (MPI counts are int; tests lower it to exercise the splitting).
  explicit MpiCommunicator(double timeout_s, size_t max_message_bytes = size_t(1) << 30);
  ~MpiCommunicator() override;
  MpiCommunicator(const MpiCommunicator&) = delete;
  MpiCommunicator& operator=(const MpiCommunicator&) = delete;

  std::string name() const override { return "mpi"; }
  int rank() const override { return rank_; }
  int world_size() const override { return size_; }
  int local_rank() const override { return local_rank_; }

  void all_reduce(void* buf, size_t n, DType dtype, ReduceOp op) override;
  void reduce_scatter(const void* send, void* recv, size_t count, DType dtype,
                      ReduceOp op) override;
  void all_gather(const void* send, void* recv, size_t count, DType dtype) override;
  void broadcast(void* buf, size_t bytes, int root) override;
  void barrier() override;
  void check_same_on_all_ranks(const std::string& what, const std::string& value) override;

  // A private duplicate of MPI_COMM_WORLD (so srkit's messages never match anyone
  // else's), for bootstrapping other libraries (NCCL).
  MPI_Comm comm() const { return comm_; }
  double timeout_s() const { return timeout_s_; }

  // Prints "srkit: <what> timed out after <t> s waiting for <who>" to stderr and
  // aborts the job with a non-zero code. Shared with the NCCL communicator.
  [[noreturn]] void abort_timeout(const char* what, const std::string& who) const;

 private:
  // Block q of a buffer split over the ranks: elements [offset(q), offset(q) + length(q)).
  struct Blocks {
    size_t block;  // elements per block; the last non-empty one may be shorter
    size_t n;      // elements in all
    size_t offset(int q) const { return std::min(n, size_t(q) * block); }
    size_t length(int q) const { return std::min(n, offset(q) + block) - offset(q); }
  };
  // Outstanding requests and the peer rank of each, for the timeout message.
  struct Pending {
    std::vector<MPI_Request> requests;
    std::vector<int> peers;
  };

  void post_send(Pending& p, const void* buf, size_t bytes, int peer, int tag);
  void post_recv(Pending& p, void* buf, size_t bytes, int peer, int tag);
  // Completes every request of p, or aborts the job when the deadline passes.
  void wait(const char* what, Pending& p);

  // Every rank's send holds the whole layout; out (blocks.length(rank) elements,
  // may alias send's own block) receives the rank-order reduction of this rank's block.
  void reduce_scatter_blocks(const char* what, const void* send, void* out, const Blocks& blocks,
                             DType dtype, ReduceOp op);
  // Root's buf reaches every rank (point to point from the root).
  void broadcast_from(const char* what, void* buf, size_t bytes, int root);
  // buf holds this rank's block in place; afterwards it holds every rank's block.
  // Elements are elem_bytes opaque bytes (gathers never interpret them).
  void all_gather_blocks(const char* what, void* buf, const Blocks& blocks, size_t elem_bytes);

  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0;
  int size_ = 1;
  int local_rank_ = 0;
  bool owns_mpi_ = false;
  double timeout_s_;
  size_t max_message_bytes_;
  std::vector<unsigned char> scratch_;  // received contributions, reused across calls
};

}  // namespace srkit

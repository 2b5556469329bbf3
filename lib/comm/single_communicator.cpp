// The communicator of a single process: no peers, every collective is local.
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>

#include "lib/comm/communicator.h"

namespace srkit {
namespace {

class SingleCommunicator final : public Communicator {
 public:
  std::string name() const override { return "single"; }
  int rank() const override { return 0; }
  int world_size() const override { return 1; }
  int local_rank() const override { return 0; }

  // With one rank the rank-order sum of one contribution is the contribution and
  // the mean multiplies by 1/1 = 1 exactly: every reduction is the identity.
  void all_reduce(void*, size_t, DType, ReduceOp) override {}
  void reduce_scatter(const void* send, void* recv, size_t count, DType dtype, ReduceOp) override {
    copy(recv, send, count * dtype_size(dtype));
  }
  void all_gather(const void* send, void* recv, size_t count, DType dtype) override {
    copy(recv, send, count * dtype_size(dtype));
  }
  void broadcast(void*, size_t, int root) override {
    if (root != 0) {
      throw std::invalid_argument("broadcast: root " + std::to_string(root) +
                                  " out of range for world size 1");
    }
  }
  void barrier() override {}
  void check_same_on_all_ranks(const std::string&, const std::string&) override {}

 private:
  void copy(void* dst, const void* src, size_t bytes) {
    Timed timed(this);
    if (dst != src && bytes > 0) std::memmove(dst, src, bytes);
  }
};

}  // namespace

std::unique_ptr<Communicator> make_single_communicator() {
  return std::make_unique<SingleCommunicator>();
}

}  // namespace srkit

// The MPI side of test_comm_mpi: scenarios that run on every rank of an
// `mpirun -np W` job. Each rank checks its own results against references it
// computes locally from the inputs of all ranks (which are pure functions of
// rank and index), prints one RESULT line with a hash of everything it received,
// and ends with "[rank r] OK <scenario>" or FAIL lines. Every rank runs the same
// collectives even after a failure, so a failing check never turns into a hang.
#pragma once

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "kernels/common/bf16.h"
#include "lib/comm/communicator.h"
#include "lib/comm/mpi_communicator.h"

namespace srkit::mpi_test {

inline uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Rank q's input element i of test case `salt`: sign, 24 mantissa bits and an
// exponent in [-20, 20], so that partial sums lose different low bits and the
// order of the additions shows in the result.
inline float input_value(int q, size_t i, uint64_t salt) {
  const uint64_t r = splitmix64((salt << 40) ^ (uint64_t(q) << 32) ^ i);
  const float mantissa = 1.0f + float(r & 0xffffff) / float(1 << 24);
  const float x = std::ldexp(mantissa, int((r >> 24) % 41) - 20);
  return (r >> 63) ? -x : x;
}

// One contribution per rank, in dtype, with the rank-order reduction expected of it.
struct Case {
  DType dtype;
  ReduceOp op;
  size_t n;
  uint64_t salt;
  int world;

  std::vector<unsigned char> input(int q) const {
    std::vector<unsigned char> out(n * dtype_size(dtype));
    for (size_t i = 0; i < n; ++i) {
      const float x = input_value(q, i, salt);
      if (dtype == DType::kF32) {
        std::memcpy(out.data() + 4 * i, &x, 4);
      } else {
        const bf16 h = float_to_bf16_rn(x);
        std::memcpy(out.data() + 2 * i, &h, 2);
      }
    }
    return out;
  }
  float widened(int q, size_t i) const {
    const float x = input_value(q, i, salt);
    return dtype == DType::kF32 ? x : bf16_to_float(float_to_bf16_rn(x));
  }
  // The documented rule, element by element: fp32 adds in the given rank order,
  // mean = sum * (1.0f / W), bf16 rounded once.
  std::vector<unsigned char> expected(bool reverse_order = false) const {
    std::vector<unsigned char> out(n * dtype_size(dtype));
    for (size_t i = 0; i < n; ++i) {
      float s = widened(reverse_order ? world - 1 : 0, i);
      for (int k = 1; k < world; ++k) s = s + widened(reverse_order ? world - 1 - k : k, i);
      if (op == ReduceOp::kMean) s = s * (1.0f / float(world));
      if (dtype == DType::kF32) {
        std::memcpy(out.data() + 4 * i, &s, 4);
      } else {
        const bf16 h = float_to_bf16_rn(s);
        std::memcpy(out.data() + 2 * i, &h, 2);
      }
    }
    return out;
  }
  std::string label(const char* collective) const {
    return std::string(collective) + " " + dtype_name(dtype) +
           (op == ReduceOp::kSum ? " sum" : " mean") + " n=" + std::to_string(n);
  }
};

class Checker {
 public:
  explicit Checker(int rank) : rank_(rank) {}
  void expect(bool ok, const std::string& what) {
    if (ok) return;
    ++failures_;
    std::fprintf(stderr, "[rank %d] FAIL %s\n", rank_, what.c_str());
  }
  void expect_bytes(const std::vector<unsigned char>& got, const std::vector<unsigned char>& want,
                    const std::string& what) {
    expect(got == want, what + ": result differs from the rank-order reference");
  }
  // Everything a rank received goes into the hash that the RESULT line reports.
  void absorb(const void* data, size_t bytes) {
    const unsigned char* p = static_cast<const unsigned char*>(data);
    for (size_t i = 0; i < bytes; ++i) hash_ = (hash_ ^ p[i]) * 0x100000001b3ull;
  }
  int finish(const char* scenario) const {
    std::printf("RESULT rank=%d hash=%016" PRIx64 "\n", rank_, hash_);
    if (failures_ == 0) std::printf("[rank %d] OK %s\n", rank_, scenario);
    std::fflush(stdout);
    return failures_ == 0 ? 0 : 2;
  }

 private:
  int rank_;
  int failures_ = 0;
  uint64_t hash_ = 0xcbf29ce484222325ull;
};

inline void check_all_reduce(Communicator& comm, Checker& check, const Case& c) {
  std::vector<unsigned char> buf = c.input(comm.rank());
  comm.all_reduce(buf.data(), c.n, c.dtype, c.op);
  check.expect_bytes(buf, c.expected(), c.label("all_reduce"));
  check.absorb(buf.data(), buf.size());
}

// reduce_scatter of W blocks of `count`, then all_gather of the reduced blocks:
// the round trip equals an all_reduce of the whole buffer.
inline void check_round_trip(Communicator& comm, Checker& check, const Case& whole) {
  const int W = comm.world_size(), r = comm.rank();
  const size_t count = whole.n / size_t(W), es = dtype_size(whole.dtype);
  const std::vector<unsigned char> send = whole.input(r);
  const std::vector<unsigned char> want = whole.expected();
  std::vector<unsigned char> block(count * es);
  comm.reduce_scatter(send.data(), block.data(), count, whole.dtype, whole.op);
  check.expect(std::equal(block.begin(), block.end(), want.begin() + size_t(r) * count * es),
               whole.label("reduce_scatter") + ": block differs from the rank-order reference");
  // In place: the reduced block lands over this rank's own block of send.
  std::vector<unsigned char> inplace_send = send;
  unsigned char* own = inplace_send.data() + size_t(r) * count * es;
  comm.reduce_scatter(inplace_send.data(), own, count, whole.dtype, whole.op);
  check.expect(std::equal(own, own + count * es, block.begin()),
               whole.label("reduce_scatter in place") + ": differs from out of place");
  std::vector<unsigned char> gathered(size_t(W) * count * es);
  comm.all_gather(block.data(), gathered.data(), count, whole.dtype);
  check.expect_bytes(gathered, want, whole.label("reduce_scatter+all_gather"));
  // In place, as ZeRO-1 gathers updated weights: own block already in position.
  std::vector<unsigned char> inplace(gathered.size(), 0xee);
  std::memcpy(inplace.data() + size_t(r) * count * es, block.data(), block.size());
  comm.all_gather(inplace.data() + size_t(r) * count * es, inplace.data(), count, whole.dtype);
  check.expect_bytes(inplace, want, whole.label("all_gather in place"));
  check.absorb(gathered.data(), gathered.size());
}

inline void check_broadcast(Communicator& comm, Checker& check, size_t bytes, int root) {
  std::vector<unsigned char> want(bytes);
  for (size_t i = 0; i < bytes; ++i) want[i] = static_cast<unsigned char>(splitmix64(i) >> 56);
  std::vector<unsigned char> buf = comm.rank() == root ? want : std::vector<unsigned char>(bytes);
  comm.broadcast(buf.data(), bytes, root);
  check.expect(buf == want, "broadcast of " + std::to_string(bytes) + " bytes from root " +
                                std::to_string(root));
  check.absorb(buf.data(), buf.size());
}

// Every collective, both dtypes and ops, sizes around the block boundaries
// (empty, fewer elements than ranks, not a multiple of W, several reduce tiles).
inline int scenario_collectives() {
  auto comm = make_communicator("auto", 20);
  const int W = comm->world_size(), r = comm->rank();
  Checker check(r);
  check.expect(comm->name() == "mpi", "auto under mpirun gave '" + comm->name() + "'");
  check.expect(comm->local_rank() == r, "one node: local rank should equal rank");

  size_t order_sensitive = 0;  // elements whose result depends on the order of the adds
  uint64_t salt = 1;
  for (DType dtype : {DType::kF32, DType::kBF16}) {
    for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMean}) {
      for (size_t n : {size_t(0), size_t(1), size_t(2), size_t(1000), size_t(70001)}) {
        const Case c{dtype, op, n, salt++, W};
        check_all_reduce(*comm, check, c);
        const auto forward = c.expected(), reverse = c.expected(true);
        for (size_t i = 0; i < forward.size(); i += dtype_size(dtype)) {
          order_sensitive += std::memcmp(&forward[i], &reverse[i], dtype_size(dtype)) != 0;
        }
      }
      check_round_trip(*comm, check, Case{dtype, op, size_t(W) * 4099, salt++, W});
    }
  }
  std::printf("[rank %d] order-sensitive elements: %zu\n", r, order_sensitive);
  // With two ranks IEEE addition is commutative, so only W >= 3 can show order.
  if (W >= 3) check.expect(order_sensitive > 0, "inputs never made the order matter");

  check_broadcast(*comm, check, 100000, W - 1);
  check_broadcast(*comm, check, 0, 0);
  comm->barrier();
  comm->check_same_on_all_ranks("model", "{\"n_layer\": 2, \"strategy\": \"bf16-sr\"}");

  {
    // Messages cut into pieces of 1000 bytes (not a multiple of any element size).
    MpiCommunicator pieces(20, 1000);
    check_all_reduce(pieces, check, Case{DType::kF32, ReduceOp::kSum, 30011, salt++, W});
    check_all_reduce(pieces, check, Case{DType::kBF16, ReduceOp::kMean, 30011, salt++, W});
    check_broadcast(pieces, check, 10007, 0);
    pieces.barrier();
  }
  check.expect(comm->comm_seconds() > 0, "comm_seconds did not grow");
  return check.finish("collectives");
}

// Rank 1 describes a different model: every rank must throw, naming rank 1.
inline int scenario_check_same_differs() {
  auto comm = make_communicator("auto", 20);
  const std::string value = comm->rank() == 1 ? "{\"n_layer\": 3}" : "{\"n_layer\": 2}";
  try {
    comm->check_same_on_all_ranks("model", value);
  } catch (const std::runtime_error& e) {
    std::fprintf(stderr, "[rank %d] caught: %s\n", comm->rank(), e.what());
    return 3;
  }
  std::printf("[rank %d] check_same passed although rank 1 differs\n", comm->rank());
  return 0;
}

// Rank 1 stops participating; rank 0's all_reduce must give up after 2 s and
// take the whole job down.
inline int scenario_timeout() {
  auto comm = make_communicator("auto", 2);
  if (comm->rank() == 1) {
    std::this_thread::sleep_for(std::chrono::seconds(120));
    return 0;
  }
  std::vector<float> buf(1000, 1.0f);
  comm->all_reduce(buf.data(), buf.size(), DType::kF32, ReduceOp::kSum);
  std::printf("[rank %d] all_reduce returned without rank 1\n", comm->rank());
  return 0;
}

inline int run_worker(const std::string& scenario) {
  try {
    if (scenario == "collectives") return scenario_collectives();
    if (scenario == "check_same_differs") return scenario_check_same_differs();
    if (scenario == "timeout") return scenario_timeout();
    std::fprintf(stderr, "unknown SRKIT_MPI_WORKER scenario '%s'\n", scenario.c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "worker %s: %s\n", scenario.c_str(), e.what());
  }
  return 4;
}

}  // namespace srkit::mpi_test

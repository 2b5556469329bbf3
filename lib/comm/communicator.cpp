#include "lib/comm/communicator.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <thread>

#include "kernels/common/bf16.h"

#if defined(SRKIT_HAVE_MPI)
#include "lib/mpi/mpi_communicator.h"
#endif
#if defined(SRKIT_HAVE_MPI) && defined(SRKIT_HAVE_CUDA)
#include "lib/cuda/nccl_communicator.h"
#endif

namespace srkit {

namespace {

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// acc[i] = widen(src[i]) (first) or acc[i] + widen(src[i]) (add).
template <bool kFirst>
void accumulate(float* acc, const void* src, size_t m, DType dtype) {
  if (dtype == DType::kF32) {
    const float* s = static_cast<const float*>(src);
    for (size_t i = 0; i < m; ++i) acc[i] = kFirst ? s[i] : acc[i] + s[i];
  } else {
    const bf16* s = static_cast<const bf16*>(src);
    for (size_t i = 0; i < m; ++i) {
      const float x = bf16_to_float(s[i]);
      acc[i] = kFirst ? x : acc[i] + x;
    }
  }
}

const char* byte_offset(const void* p, size_t elements, DType dtype) {
  return static_cast<const char*>(p) + elements * dtype_size(dtype);
}

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

Communicator::Timed::Timed(Communicator* c) : c_(c), start_(now_seconds()) {}
Communicator::Timed::~Timed() { c_->comm_seconds_ += now_seconds() - start_; }

namespace {
constexpr auto kSpinWindow = std::chrono::milliseconds(2);
constexpr auto kMinNap = std::chrono::microseconds(20);
constexpr auto kMaxNap = std::chrono::microseconds(1000);
}  // namespace

PollBackoff::PollBackoff(double timeout_s)
    : start_(std::chrono::steady_clock::now()), timeout_(timeout_s), nap_(kMinNap) {}

bool PollBackoff::pause(bool progressed) {
  if (progressed) {
    nap_ = kMinNap;
    return true;
  }
  const auto waited = std::chrono::steady_clock::now() - start_;
  if (timeout_.count() > 0 && waited >= timeout_) return false;
  if (waited < kSpinWindow) {
    std::this_thread::yield();
  } else {
    std::this_thread::sleep_for(nap_);
    nap_ = std::min(nap_ * 2, kMaxNap);
  }
  return true;
}

void reduce_in_rank_order(const void* const* parts, int nparts, void* out, size_t n, DType dtype,
                          ReduceOp op) {
  if (nparts < 1) {
    throw std::invalid_argument("reduce_in_rank_order: need at least one part, got " +
                                std::to_string(nparts));
  }
  const float scale = 1.0f / static_cast<float>(nparts);
  // A tile of fp32 accumulators stays in L1 while each part streams through it,
  // and lets out alias a part (the tile is stored after all its reads).
  constexpr size_t kTile = 1024;
  float acc[kTile];
  for (size_t t0 = 0; t0 < n; t0 += kTile) {
    const size_t m = std::min(kTile, n - t0);
    accumulate<true>(acc, byte_offset(parts[0], t0, dtype), m, dtype);
    for (int q = 1; q < nparts; ++q) {
      accumulate<false>(acc, byte_offset(parts[q], t0, dtype), m, dtype);
    }
    if (op == ReduceOp::kMean) {
      for (size_t i = 0; i < m; ++i) acc[i] = acc[i] * scale;
    }
    if (dtype == DType::kF32) {
      std::memcpy(static_cast<float*>(out) + t0, acc, m * sizeof(float));
    } else {
      bf16* o = static_cast<bf16*>(out) + t0;
      for (size_t i = 0; i < m; ++i) o[i] = float_to_bf16_rn(acc[i]);
    }
  }
}

int launcher_world_size(std::string* source) {
  static const char* const kVars[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "MV2_COMM_WORLD_SIZE",
                                      "SLURM_STEP_NUM_TASKS"};
  for (const char* var : kVars) {
    const char* value = std::getenv(var);
    if (value == nullptr || *value == '\0') continue;
    char* end = nullptr;
    const long w = std::strtol(value, &end, 10);
    if (*end != '\0' || w < 1 || w > (1 << 24)) {
      throw std::invalid_argument(std::string("environment variable ") + var + "='" + value +
                                  "': expected a positive world size");
    }
    if (source) *source = var;
    return static_cast<int>(w);
  }
  if (source) source->clear();
  return 1;
}

std::unique_ptr<Communicator> make_single_communicator() {
  return std::make_unique<SingleCommunicator>();
}

#if defined(SRKIT_HAVE_MPI)
namespace {
// A launcher that announces W ranks while MPI_Init reports another size means
// mpirun and the linked MPI library come from different installations: every
// process would train alone.
void check_launcher_size(const Communicator& comm) {
  std::string source;
  const int announced = launcher_world_size(&source);
  if (!source.empty() && announced != comm.world_size()) {
    throw std::runtime_error("launcher announced " + std::to_string(announced) + " ranks (" +
                             source + ") but MPI reports " + std::to_string(comm.world_size()) +
                             ": mpirun/srun and the MPI library srkit links do not match");
  }
}
}  // namespace
#endif

std::unique_ptr<Communicator> make_communicator(const std::string& kind, double timeout_s) {
  if (kind == "single") return make_single_communicator();
  if (kind == "auto") {
    std::string source;
    const int announced = launcher_world_size(&source);
    if (announced <= 1) return make_single_communicator();
#if defined(SRKIT_HAVE_MPI)
    return make_communicator("mpi", timeout_s);
#else
    throw std::runtime_error("launched with world size " + std::to_string(announced) + " (" +
                             source +
                             ") but srkit was built without MPI: install libopenmpi-dev and "
                             "rebuild, or run without mpirun/srun");
#endif
  }
  if (kind == "mpi") {
#if defined(SRKIT_HAVE_MPI)
    auto comm = std::make_unique<MpiCommunicator>(timeout_s);
    check_launcher_size(*comm);
    return comm;
#else
    throw std::runtime_error(
        "communicator 'mpi': srkit was built without MPI (install libopenmpi-dev and rebuild)");
#endif
  }
  if (kind == "nccl") {
#if defined(SRKIT_HAVE_MPI) && defined(SRKIT_HAVE_CUDA)
    auto mpi = std::make_unique<MpiCommunicator>(timeout_s);
    check_launcher_size(*mpi);
    return std::make_unique<NcclCommunicator>(std::move(mpi), timeout_s);
#else
    throw std::runtime_error(
        "communicator 'nccl': srkit was built without CUDA and MPI (NCCL needs both)");
#endif
  }
  throw std::invalid_argument("communicator '" + kind + "': expected auto, single, mpi or nccl");
}

}  // namespace srkit

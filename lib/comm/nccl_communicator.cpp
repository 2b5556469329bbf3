// Built with CUDA and MPI (NCCL is bootstrapped through MPI); otherwise
// make_communicator("nccl") says why. In the CPU emulation <nccl.h> is the
// emulated world of one (kernels/cuda/emu/include/nccl.h).
#include "lib/comm/nccl_communicator.h"

#include <nccl.h>

#include <stdexcept>

#include "kernels/cuda/compat.cuh"
#include "kernels/cuda/device.h"

namespace srkit {

namespace {

ncclDataType_t nccl_type(DType t) { return t == DType::kF32 ? ncclFloat32 : ncclBfloat16; }
ncclRedOp_t nccl_op(ReduceOp op) { return op == ReduceOp::kSum ? ncclSum : ncclAvg; }

[[noreturn]] void throw_nccl(const char* what, ncclResult_t r) {
  throw std::runtime_error(std::string(what) + " failed: " + ncclGetErrorString(r));
}

}  // namespace

NcclCommunicator::NcclCommunicator(std::unique_ptr<MpiCommunicator> mpi, double timeout_s)
    : mpi_(std::move(mpi)), timeout_s_(timeout_s) {
  if (!mpi_) throw std::invalid_argument("NcclCommunicator: needs an MPI communicator");
  try {
    int count = 0;
    cuda::check(cudaGetDeviceCount(&count), "cudaGetDeviceCount");
    if (count < 1) {
      throw std::runtime_error("NcclCommunicator: no CUDA device on rank " +
                               std::to_string(rank()));
    }
    device_ = local_rank() % count;
    cuda::check(cudaSetDevice(device_), "cudaSetDevice");
    ncclUniqueId id{};
    if (rank() == 0) {
      const ncclResult_t r = ncclGetUniqueId(&id);
      if (r != ncclSuccess) throw_nccl("ncclGetUniqueId", r);
    }
    mpi_->broadcast(&id, sizeof id, 0);
    cudaStream_t stream = nullptr;
    cuda::check(cudaStreamCreate(&stream), "cudaStreamCreate");
    own_stream_ = stream_ = stream;
    // Non-blocking: every NCCL call returns at once and the host polls the
    // communicator's state, so that a missing peer ends in a timeout, not a hang.
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    ncclComm_t comm = nullptr;
    const ncclResult_t r = ncclCommInitRankConfig(&comm, world_size(), id, rank(), &config);
    comm_ = comm;
    wait_issued("ncclCommInitRankConfig", r);
  } catch (...) {
    release();
    throw;
  }
}

NcclCommunicator::~NcclCommunicator() { release(); }

void NcclCommunicator::release() noexcept {
  if (comm_) {
    bool flushed = false;
    try {
      wait_issued("ncclCommFinalize", ncclCommFinalize(comm_));
      flushed = true;
    } catch (const std::exception&) {
      // An error already reported elsewhere: tear down without flushing.
    }
    if (flushed) {
      ncclCommDestroy(comm_);
    } else {
      ncclCommAbort(comm_);
    }
    comm_ = nullptr;
  }
  if (own_stream_) cudaStreamDestroy(own_stream_);
  own_stream_ = stream_ = nullptr;
}

void NcclCommunicator::abort_timeout(const char* what) {
  ncclCommAbort(comm_);
  comm_ = nullptr;
  mpi_->abort_timeout((std::string(what) + " (nccl)").c_str(),
                      "a peer rank (NCCL does not say which)");
}

void NcclCommunicator::wait_issued(const char* what, int nccl_result) {
  const auto r = static_cast<ncclResult_t>(nccl_result);
  if (r != ncclSuccess && r != ncclInProgress) throw_nccl(what, r);
  PollBackoff backoff(timeout_s_);
  for (;;) {
    ncclResult_t state = ncclSuccess;
    ncclCommGetAsyncError(comm_, &state);
    if (state == ncclSuccess) return;
    if (state != ncclInProgress) throw_nccl(what, state);
    if (!backoff.pause(false)) abort_timeout(what);
  }
}

void NcclCommunicator::wait_stream(const char* what) {
  PollBackoff backoff(timeout_s_);
  for (;;) {
    const cudaError_t e = cudaStreamQuery(stream_);
    if (e == cudaSuccess) return;
    if (e != cudaErrorNotReady) cuda::check(e, what);
    // A network error shows here, not on the stream, which would wait forever.
    ncclResult_t state = ncclSuccess;
    ncclCommGetAsyncError(comm_, &state);
    if (state != ncclSuccess && state != ncclInProgress) throw_nccl(what, state);
    if (!backoff.pause(false)) abort_timeout(what);
  }
}

void NcclCommunicator::all_reduce(void* buf, size_t n, DType dtype, ReduceOp op) {
  Timed timed(this);
  if (n == 0) return;
  wait_issued("all_reduce",
              ncclAllReduce(buf, buf, n, nccl_type(dtype), nccl_op(op), comm_, stream_));
  wait_stream("all_reduce");
}

void NcclCommunicator::reduce_scatter(const void* send, void* recv, size_t count, DType dtype,
                                      ReduceOp op) {
  Timed timed(this);
  if (count == 0) return;
  wait_issued("reduce_scatter",
              ncclReduceScatter(send, recv, count, nccl_type(dtype), nccl_op(op), comm_, stream_));
  wait_stream("reduce_scatter");
}

void NcclCommunicator::all_gather(const void* send, void* recv, size_t count, DType dtype) {
  Timed timed(this);
  if (count == 0) return;
  wait_issued("all_gather", ncclAllGather(send, recv, count, nccl_type(dtype), comm_, stream_));
  wait_stream("all_gather");
}

void NcclCommunicator::broadcast(void* buf, size_t bytes, int root) {
  Timed timed(this);
  if (root < 0 || root >= world_size()) {
    throw std::invalid_argument("broadcast: root " + std::to_string(root) +
                                " out of range for world size " + std::to_string(world_size()));
  }
  if (bytes == 0) return;
  wait_issued("broadcast", ncclBroadcast(buf, buf, bytes, ncclUint8, root, comm_, stream_));
  wait_stream("broadcast");
}

void NcclCommunicator::barrier() {
  Timed timed(this);
  wait_stream("barrier");
  mpi_->barrier();
}

void NcclCommunicator::check_same_on_all_ranks(const std::string& what, const std::string& value) {
  Timed timed(this);
  mpi_->check_same_on_all_ranks(what, value);
}

}  // namespace srkit

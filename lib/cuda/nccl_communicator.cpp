// Compiled with the CUDA backend; NCCL is bootstrapped through MPI, so without MPI
// this file is empty and make_communicator("nccl") says why.
#if defined(SRKIT_HAVE_MPI)

#include "lib/cuda/nccl_communicator.h"

#include <cublasLt.h>
#include <cuda_runtime.h>
#include <nccl.h>

#include <algorithm>
#include <stdexcept>

#include "kernels/cuda/device.h"

namespace srkit {

namespace {

ncclDataType_t nccl_type(DType t) { return t == DType::kF32 ? ncclFloat32 : ncclBfloat16; }
cudaDataType_t cuda_type(DType t) { return t == DType::kF32 ? CUDA_R_32F : CUDA_R_16BF; }

[[noreturn]] void throw_nccl(const char* what, ncclResult_t r) {
  throw std::runtime_error(std::string(what) + " failed: " + ncclGetErrorString(r));
}

void check_lt(cublasStatus_t s, const char* what) {
  if (s != CUBLAS_STATUS_SUCCESS) {
    throw std::runtime_error(std::string(what) + " failed: cuBLAS status " + std::to_string(s));
  }
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
    stream_ = stream;
    cublasLtHandle_t lt = nullptr;
    check_lt(cublasLtCreate(&lt), "cublasLtCreate");
    lt_ = lt;
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
  if (lt_) cublasLtDestroy(lt_);
  if (scratch_) cudaFree(scratch_);
  if (stream_) cudaStreamDestroy(stream_);
  lt_ = nullptr;
  scratch_ = nullptr;
  stream_ = nullptr;
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

void* NcclCommunicator::scratch(size_t bytes) {
  if (bytes > scratch_bytes_) {
    if (scratch_) cuda::check(cudaFree(scratch_), "cudaFree");
    scratch_ = nullptr;
    scratch_bytes_ = 0;
    cuda::check(cudaMalloc(&scratch_, bytes), "cudaMalloc (nccl scratch)");
    scratch_bytes_ = bytes;
  }
  return scratch_;
}

void NcclCommunicator::scale_by_inverse_world(void* dst, const void* src, size_t n, DType dtype) {
  // lib/ is compiled by the host compiler, so the element-wise scale is cuBLASLt's
  // matrix transform C = alpha * A (+ beta * B, B absent as beta = 0) over a
  // column vector: fp32 scale type, so each element is computed as
  // float(a) * (1.0f / W) in fp32 and rounded once to the output type.
  const float alpha = 1.0f / static_cast<float>(world_size());
  const float beta = 0.0f;
  cublasLtMatrixTransformDesc_t desc = nullptr;
  check_lt(cublasLtMatrixTransformDescCreate(&desc, CUDA_R_32F),
           "cublasLtMatrixTransformDescCreate");
  const size_t es = dtype_size(dtype);
  constexpr size_t kChunk = size_t(1) << 28;  // rows per call: the kernels index with int
  cublasStatus_t status = CUBLAS_STATUS_SUCCESS;
  for (size_t off = 0; off < n && status == CUBLAS_STATUS_SUCCESS; off += kChunk) {
    const size_t m = std::min(kChunk, n - off);
    cublasLtMatrixLayout_t layout = nullptr;
    status = cublasLtMatrixLayoutCreate(&layout, cuda_type(dtype), m, 1, static_cast<int64_t>(m));
    if (status != CUBLAS_STATUS_SUCCESS) break;
    status = cublasLtMatrixTransform(lt_, desc, &alpha, static_cast<const char*>(src) + off * es,
                                     layout, &beta, nullptr, nullptr,
                                     static_cast<char*>(dst) + off * es, layout, stream_);
    cublasLtMatrixLayoutDestroy(layout);
  }
  cublasLtMatrixTransformDescDestroy(desc);
  check_lt(status, "cublasLtMatrixTransform (mean scale)");
}

void NcclCommunicator::all_reduce(void* buf, size_t n, DType dtype, ReduceOp op) {
  Timed timed(this);
  if (n == 0) return;
  if (op == ReduceOp::kSum) {
    wait_issued("all_reduce",
                ncclAllReduce(buf, buf, n, nccl_type(dtype), ncclSum, comm_, stream_));
  } else {
    void* sum = scratch(n * dtype_size(dtype));
    wait_issued("all_reduce",
                ncclAllReduce(buf, sum, n, nccl_type(dtype), ncclSum, comm_, stream_));
    scale_by_inverse_world(buf, sum, n, dtype);
  }
  wait_stream("all_reduce");
}

void NcclCommunicator::reduce_scatter(const void* send, void* recv, size_t count, DType dtype,
                                      ReduceOp op) {
  Timed timed(this);
  if (count == 0) return;
  void* out = op == ReduceOp::kSum ? recv : scratch(count * dtype_size(dtype));
  wait_issued("reduce_scatter",
              ncclReduceScatter(send, out, count, nccl_type(dtype), ncclSum, comm_, stream_));
  if (op == ReduceOp::kMean) scale_by_inverse_world(recv, out, count, dtype);
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

#endif  // SRKIT_HAVE_MPI

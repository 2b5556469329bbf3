// The emulated NCCL of kernels/cuda/emu/include/nccl.h: one rank, so a sum, a
// mean (x * 1/1), a max or a min of one contribution is that contribution, and
// every collective copies its send buffer to its receive buffer on the stream.
#include <nccl.h>

#include <cstring>

#include "kernels/cuda/compat.cuh"

struct ncclComm {
  bool finalized = false;
};

namespace {

size_t type_size(ncclDataType_t t) {
  switch (t) {
    case ncclInt8:
    case ncclUint8:
      return 1;
    case ncclFloat16:
    case ncclBfloat16:
      return 2;
    case ncclInt32:
    case ncclUint32:
    case ncclFloat32:
      return 4;
    case ncclInt64:
    case ncclUint64:
    case ncclFloat64:
      return 8;
  }
  return 0;
}

ncclResult_t copy_on_stream(const void* send, void* recv, size_t count, ncclDataType_t t,
                            ncclComm_t comm, srkit::cuda::Stream stream) {
  if (!comm || comm->finalized) return ncclInvalidUsage;
  const size_t es = type_size(t);
  if (es == 0 || ((!send || !recv) && count > 0)) return ncclInvalidArgument;
  if (send == recv || count == 0) return ncclSuccess;
  return cudaMemcpyAsync(recv, send, count * es, cudaMemcpyDeviceToDevice, stream) == cudaSuccess
             ? ncclSuccess
             : ncclUnhandledCudaError;
}

}  // namespace

const char* ncclGetErrorString(ncclResult_t result) {
  switch (result) {
    case ncclSuccess:
      return "no error";
    case ncclUnhandledCudaError:
      return "unhandled cuda error";
    case ncclSystemError:
      return "unhandled system error";
    case ncclInternalError:
      return "internal error";
    case ncclInvalidArgument:
      return "invalid argument";
    case ncclInvalidUsage:
      return "invalid usage (the emulated NCCL has a world of one rank)";
    case ncclRemoteError:
      return "remote process exited or there was a network error";
    case ncclInProgress:
      return "NCCL operation in progress";
    default:
      return "unknown result code";
  }
}

ncclResult_t ncclGetUniqueId(ncclUniqueId* uniqueId) {
  if (!uniqueId) return ncclInvalidArgument;
  std::memset(uniqueId->internal, 0, sizeof uniqueId->internal);
  std::memcpy(uniqueId->internal, "srkit-emulated-nccl", 19);
  return ncclSuccess;
}

ncclResult_t ncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId, int rank,
                                    ncclConfig_t*) {
  if (!comm) return ncclInvalidArgument;
  *comm = nullptr;
  if (nranks != 1 || rank != 0) return ncclInvalidUsage;
  *comm = new ncclComm;
  return ncclSuccess;
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* asyncError) {
  if (!comm || !asyncError) return ncclInvalidArgument;
  *asyncError = ncclSuccess;
  return ncclSuccess;
}

ncclResult_t ncclCommFinalize(ncclComm_t comm) {
  if (!comm) return ncclInvalidArgument;
  comm->finalized = true;
  return ncclSuccess;
}

ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  delete comm;
  return ncclSuccess;
}

ncclResult_t ncclCommAbort(ncclComm_t comm) {
  delete comm;
  return ncclSuccess;
}

ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                           ncclDataType_t datatype, ncclRedOp_t, ncclComm_t comm,
                           srkit::cuda::Stream stream) {
  return copy_on_stream(sendbuff, recvbuff, count, datatype, comm, stream);
}

ncclResult_t ncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                               ncclDataType_t datatype, ncclRedOp_t, ncclComm_t comm,
                               srkit::cuda::Stream stream) {
  return copy_on_stream(sendbuff, recvbuff, recvcount, datatype, comm, stream);
}

ncclResult_t ncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                           ncclDataType_t datatype, ncclComm_t comm, srkit::cuda::Stream stream) {
  return copy_on_stream(sendbuff, recvbuff, sendcount, datatype, comm, stream);
}

ncclResult_t ncclBroadcast(const void* sendbuff, void* recvbuff, size_t count,
                           ncclDataType_t datatype, int root, ncclComm_t comm,
                           srkit::cuda::Stream stream) {
  if (root != 0) return ncclInvalidArgument;
  return copy_on_stream(sendbuff, recvbuff, count, datatype, comm, stream);
}

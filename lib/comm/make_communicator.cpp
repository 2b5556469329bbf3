// make_communicator: the one place that picks a communicator (communicator.h
// documents the kinds), as make_backend.cpp does for backends.
#include <memory>
#include <stdexcept>
#include <string>

#include "lib/comm/communicator.h"

#if defined(SRKIT_HAVE_MPI)
#include "lib/comm/mpi_communicator.h"
#endif
#if defined(SRKIT_HAVE_MPI) && defined(SRKIT_HAVE_CUDA)
#include "lib/comm/nccl_communicator.h"
#endif

namespace srkit {

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

#include "apps/sr-train/failure.h"

#include <cstdio>
#include <cstdlib>

namespace srkit {

int fail(const Communicator* comm, const char* what, int code) {
  if (comm == nullptr || comm->world_size() == 1) {
    std::fprintf(stderr, "sr-train: %s\n", what);
    return code;
  }
  std::fprintf(stderr, "sr-train: [rank %d] %s\n", comm->rank(), what);
  std::fflush(stdout);
  std::fflush(stderr);
  std::_Exit(code);
}

}  // namespace srkit

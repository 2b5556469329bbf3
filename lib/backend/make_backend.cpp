#include "lib/backend/make_backend.h"

#include <stdexcept>

namespace srkit {

std::unique_ptr<Backend> make_backend(const std::string& device, int threads) {
  if (device == "cpu") return make_cpu_backend(threads);
  if (device == "cuda") {
    throw std::invalid_argument(
        "--device cuda: the CUDA training backend is not part of this build yet "
        "(CUDA kernels for casts and AdamW exist; model ops run on --device cpu)");
  }
  throw std::invalid_argument("--device: expected cpu or cuda (got '" + device + "')");
}

}  // namespace srkit

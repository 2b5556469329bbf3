// The one place that turns --device into a backend.
#pragma once

#include <memory>
#include <string>

#include "lib/backend/backend.h"

namespace srkit {

// threads: CPU threads (0 = the OpenMP default; the
// CUDA backend ignores it). Throws std::invalid_argument naming --device when
// the CUDA backend is not built or no device is present (with the runtime's
// reason).
std::unique_ptr<Backend> make_backend(DeviceKind device, int threads);
// --device as given: "cpu" or "cuda" (parse_device_kind).
std::unique_ptr<Backend> make_backend(const std::string& device, int threads);

}  // namespace srkit

#include "lib/backend/device_kind.h"

#include <stdexcept>

namespace srkit {

const char* device_kind_name(DeviceKind kind) { return kind == DeviceKind::kCpu ? "cpu" : "cuda"; }

DeviceKind parse_device_kind(const std::string& text) {
  if (text == "cpu") return DeviceKind::kCpu;
  if (text == "cuda") return DeviceKind::kCuda;
  throw std::invalid_argument("--device: expected cpu or cuda (got '" + text + "')");
}

}  // namespace srkit

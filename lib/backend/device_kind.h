// The kinds of device a backend runs on. Command lines and configuration files
// spell them "cpu" and "cuda"; everything past the point where such a string
// enters (parse_device_kind) compares the enum, so the spelling and the error
// for an unknown device live in one place.
#pragma once

#include <string>

namespace srkit {

enum class DeviceKind { kCpu, kCuda };

// "cpu" or "cuda".
const char* device_kind_name(DeviceKind kind);
// The kind spelled `text`; throws std::invalid_argument
// "--device: expected cpu or cuda (got 'TEXT')" otherwise.
DeviceKind parse_device_kind(const std::string& text);

}  // namespace srkit

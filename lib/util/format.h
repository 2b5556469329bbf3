// printf-style formatting into a std::string (g++ 12 has no <format>).
#pragma once

#include <string>

namespace srkit {

std::string strprintf(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

}  // namespace srkit

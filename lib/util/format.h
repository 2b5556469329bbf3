// printf-style formatting into a std::string (g++ 12 has no <format>), and
// outside text made safe to quote in a one-line message.
#pragma once

#include <string>
#include <string_view>

namespace srkit {

std::string strprintf(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

// Outside text (a name from a file, a flag's value, a path) as it may be quoted
// in a one-line message: control characters become escapes ("\n", "\t",
// "\x01"; a backslash stays as it is), everything else is kept, UTF-8 included.
std::string printable(std::string_view text);

}  // namespace srkit

// Option parsing shared by sr-audit subcommands.
#pragma once

#include <cstdint>
#include <string>

namespace srkit::audit_app {

// A count such as "10000000" or "1e7" (scientific notation allowed when the
// value is a whole number below 2^53). Throws std::invalid_argument naming
// `flag` when the text is not a positive whole number.
uint64_t parse_count(const std::string& text, const std::string& flag);

}  // namespace srkit::audit_app

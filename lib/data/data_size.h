// How many bytes a data set takes once loaded, known from file sizes alone, so
// a run can refuse data that does not fit in memory before reading any of it
// (a 40 GB text file used to end in std::bad_alloc after minutes of reading).
#pragma once

#include <cstdint>
#include <string>

namespace srkit {

// Bytes of the token stream load_tokens(path_or_glob) returns: 2 per byte of a
// text file (one uint16 token per byte), the token payload of .bin shards.
// Files that cannot be sized count 0 (the loader then names the problem).
uint64_t loaded_token_bytes(const std::string& path_or_glob);

}  // namespace srkit

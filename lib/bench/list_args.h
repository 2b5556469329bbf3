// Comma-separated list flags of sr-bench (--models, --strategies, --batches ...).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "lib/precision.h"

namespace srkit {

// "a,b,c" -> {a, b, c}. Throws std::invalid_argument naming `flag` on an empty
// list or an empty item ("a,,b").
std::vector<std::string> split_list(const std::string& list, const std::string& flag);

// The strategies of a list flag, parsed (the one parse of a command line's
// strategies: everything downstream takes the parsed values). Like split_list,
// but a strategy spec's own overrides contain commas ("bf16-sr:m=f32,v=f32"),
// so an item with '=' and no ':' continues the previous spec. A bad spec throws
// std::invalid_argument naming `flag`.
std::vector<PrecisionStrategy> parse_strategy_list(const std::string& list,
                                                   const std::string& flag);

// Model preset names; throws naming `flag` and listing the presets on an unknown one.
std::vector<std::string> parse_model_list(const std::string& list, const std::string& flag);

// "1,2,8" -> {1, 2, 8}, each in [min, max]; throws naming `flag` otherwise.
std::vector<int> parse_int_list(const std::string& list, const std::string& flag, int min, int max);

// "3e-4,1e-3" -> {3e-4, 1e-3}, each finite and > 0; throws naming `flag` otherwise.
std::vector<double> parse_positive_real_list(const std::string& list, const std::string& flag);

// "1,2,3" -> {1, 2, 3}, decimal digits only; throws naming `flag` otherwise.
std::vector<uint64_t> parse_u64_list(const std::string& list, const std::string& flag);

}  // namespace srkit

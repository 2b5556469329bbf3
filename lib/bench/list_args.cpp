#include "lib/bench/list_args.h"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <stdexcept>

#include "lib/model/gpt_config.h"
#include "lib/precision.h"

namespace srkit {

std::vector<std::string> split_list(const std::string& list, const std::string& flag) {
  if (list.empty()) throw std::invalid_argument(flag + ": empty list");
  std::vector<std::string> items;
  size_t start = 0;
  while (true) {
    const size_t comma = list.find(',', start);
    const std::string item = list.substr(start, comma == std::string::npos ? comma : comma - start);
    if (item.empty()) throw std::invalid_argument(flag + ": empty item in '" + list + "'");
    items.push_back(item);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return items;
}

std::vector<PrecisionStrategy> parse_strategy_list(const std::string& list,
                                                   const std::string& flag) {
  std::vector<std::string> specs;
  for (const std::string& item : split_list(list, flag)) {
    const bool continues =
        item.find('=') != std::string::npos && item.find(':') == std::string::npos;
    if (continues && !specs.empty()) {
      specs.back() += "," + item;
    } else {
      specs.push_back(item);
    }
  }
  std::vector<PrecisionStrategy> strategies;
  for (const std::string& spec : specs) {
    try {
      strategies.push_back(strategy_from_string(spec));
    } catch (const std::invalid_argument& e) {
      throw std::invalid_argument(flag + ": " + e.what());
    }
  }
  return strategies;
}

std::vector<std::string> parse_model_list(const std::string& list, const std::string& flag) {
  const std::vector<std::string>& known = gpt_preset_names();
  const std::vector<std::string> models = split_list(list, flag);
  for (const std::string& m : models) {
    if (std::find(known.begin(), known.end(), m) != known.end()) continue;
    std::string names;
    for (const std::string& k : known) names += (names.empty() ? "" : ", ") + k;
    throw std::invalid_argument(flag + ": unknown model preset '" + m + "' (known: " + names + ")");
  }
  return models;
}

std::vector<int> parse_int_list(const std::string& list, const std::string& flag, int min,
                                int max) {
  std::vector<int> values;
  for (const std::string& item : split_list(list, flag)) {
    char* end = nullptr;
    errno = 0;
    const long v = std::strtol(item.c_str(), &end, 10);
    if (errno != 0 || end == item.c_str() || *end != '\0' || v < min || v > max) {
      throw std::invalid_argument(flag + ": '" + item + "' is not a whole number in [" +
                                  std::to_string(min) + ", " + std::to_string(max) + "]");
    }
    values.push_back(int(v));
  }
  return values;
}

std::vector<double> parse_positive_real_list(const std::string& list, const std::string& flag) {
  std::vector<double> values;
  for (const std::string& item : split_list(list, flag)) {
    char* end = nullptr;
    errno = 0;
    const double v = std::strtod(item.c_str(), &end);
    if (errno != 0 || end == item.c_str() || *end != '\0' || !std::isfinite(v) || !(v > 0.0)) {
      throw std::invalid_argument(flag + ": '" + item + "' is not a finite number > 0");
    }
    values.push_back(v);
  }
  return values;
}

std::vector<uint64_t> parse_u64_list(const std::string& list, const std::string& flag) {
  std::vector<uint64_t> values;
  for (const std::string& item : split_list(list, flag)) {
    uint64_t v = 0;
    const auto [ptr, ec] = std::from_chars(item.data(), item.data() + item.size(), v);
    if (ec != std::errc() || ptr != item.data() + item.size()) {
      throw std::invalid_argument(flag + ": '" + item + "' is not a whole number in [0, 2^64)");
    }
    values.push_back(v);
  }
  return values;
}

}  // namespace srkit

// Range checks for numeric flags, applied to the flag's text before CLI11
// converts it. CLI11 turns "-1" into 2^64-1 for an unsigned option and clamps
// "18446744073709551616", so a run meant to stop never did; the text is checked
// here instead: decimal digits only for unsigned flags, a finite number for real
// ones, and the stated range, which --help shows next to the flag.
// Header-only: apps/<name>/ folders with .cpp files become executables.
#pragma once

#include <CLI/CLI.hpp>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "lib/util/output_path.h"

namespace srkit::cli {

namespace detail {

inline std::string number_text(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", x);
  return buf;
}

// The text as an integer of type T, when it is one (optional leading '-' for
// signed T, then digits, nothing else) and fits.
template <class T>
bool parse_integer(const std::string& text, T& value) {
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, value);
  return ec == std::errc() && ptr == end && !text.empty() && text[0] != '+';
}

}  // namespace detail

// An unsigned integer flag in [lo, hi], written in decimal digits.
inline CLI::Validator unsigned_in(uint64_t lo, uint64_t hi) {
  const std::string range = "[" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
  return CLI::Validator(
      [lo, hi, range](std::string& text) -> std::string {
        uint64_t v = 0;
        if (!detail::parse_integer(text, v) || v < lo || v > hi) {
          return "expected an integer in " + range + ", got '" + text + "'";
        }
        return {};
      },
      "in " + range);
}

// A signed integer flag in [lo, hi].
inline CLI::Validator integer_in(int64_t lo, int64_t hi) {
  const std::string range = "[" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
  return CLI::Validator(
      [lo, hi, range](std::string& text) -> std::string {
        int64_t v = 0;
        if (!detail::parse_integer(text, v) || v < lo || v > hi) {
          return "expected an integer in " + range + ", got '" + text + "'";
        }
        return {};
      },
      "in " + range);
}

// A finite real flag in [lo, hi]; lo_open / hi_open exclude the bound.
inline CLI::Validator real_in(double lo, double hi, bool lo_open = false, bool hi_open = false) {
  const std::string range = std::string(lo_open ? "(" : "[") + detail::number_text(lo) + ", " +
                            detail::number_text(hi) + (hi_open ? ")" : "]");
  return CLI::Validator(
      [=](std::string& text) -> std::string {
        char* end = nullptr;
        const double v = text.empty() ? NAN : std::strtod(text.c_str(), &end);
        const bool parsed = !text.empty() && end == text.c_str() + text.size();
        const bool in_range =
            (lo_open ? v > lo : v >= lo) && (hi_open ? v < hi : v <= hi) && std::isfinite(v);
        if (!parsed || !in_range) {
          return "expected a finite number in " + range + ", got '" + text + "'";
        }
        return {};
      },
      "in " + range);
}

// An output file whose folder exists and is writable, checked when the
// command line is parsed, so a bad path fails before the work, not after it.
inline CLI::Validator output_file() {
  return CLI::Validator([](std::string& path) { return output_file_problem(path); }, "FILE");
}

}  // namespace srkit::cli

#include "lib/checkpoint/checkpoint_dir.h"

#include <charconv>
#include <filesystem>
#include <optional>
#include <stdexcept>
#include <string_view>

#include "lib/util/format.h"

namespace srkit {
namespace {

constexpr std::string_view kPrefix = "ckpt_";
constexpr std::string_view kSuffix = ".safetensors";

// The step of a file name "ckpt_<digits>.safetensors", if it is one.
std::optional<uint64_t> parse_step(std::string_view name) {
  if (name.size() <= kPrefix.size() + kSuffix.size() || !name.starts_with(kPrefix) ||
      !name.ends_with(kSuffix))
    return std::nullopt;
  const std::string_view digits =
      name.substr(kPrefix.size(), name.size() - kPrefix.size() - kSuffix.size());
  uint64_t step = 0;
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), step);
  if (ec != std::errc() || end != digits.data() + digits.size()) return std::nullopt;
  return step;
}

}  // namespace

std::string checkpoint_path(const std::string& dir, uint64_t step) {
  return (std::filesystem::path(dir) / strprintf("%.*s%08llu%.*s", int(kPrefix.size()),
                                                 kPrefix.data(), (unsigned long long)step,
                                                 int(kSuffix.size()), kSuffix.data()))
      .string();
}

bool is_checkpoint_file_name(const std::string& name) { return parse_step(name).has_value(); }

std::string latest_checkpoint(const std::string& dir) {
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec))
    throw std::runtime_error("checkpoint directory '" + dir +
                             "' does not exist or is not a directory");
  std::optional<uint64_t> best;
  std::string best_path;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (!entry.is_regular_file()) continue;
    const std::optional<uint64_t> step = parse_step(entry.path().filename().string());
    // Equal steps (ckpt_7 and ckpt_00000007) resolve by name, not directory order.
    if (step && (!best || *step > *best || (*step == *best && entry.path().string() > best_path))) {
      best = step;
      best_path = entry.path().string();
    }
  }
  return best_path;
}

}  // namespace srkit

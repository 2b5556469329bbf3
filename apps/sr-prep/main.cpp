// sr-prep: UTF-8 text files -> byte-level (vocab 256) llm.c .bin shards, split
// into train and val (the tail); a trainer then reads the glob DIR/PREFIX_train_*.bin.
#include <CLI/CLI.hpp>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "lib/data/bin_shard.h"
#include "lib/data/token_data.h"
#include "lib/util/format.h"

namespace fs = std::filesystem;
using namespace srkit;

namespace {

// Bad flags or inputs: exit code 2, as for a command-line parse error.
struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct Options {
  std::vector<std::string> inputs;
  std::string out_dir;
  int64_t shard_tokens = 100'000'000;  // llm.c's shard size
  double val_fraction = 0.1;
  std::string name;  // default: stem of the first input
};

std::string shard_name(const std::string& prefix, const char* split, size_t index) {
  return strprintf("%s_%s_%06zu.bin", prefix.c_str(), split, index);
}

// The number of a shard file named "<stem>NNNNNN.bin" (6 to 18 digits), if it is one.
std::optional<size_t> shard_index(const std::string& file, const std::string& stem) {
  if (!file.starts_with(stem) || !file.ends_with(".bin")) return std::nullopt;
  const std::string digits = file.substr(stem.size(), file.size() - stem.size() - 4);
  if (digits.size() < 6 || digits.size() > 18 ||
      digits.find_first_not_of("0123456789") != std::string::npos)
    return std::nullopt;
  return size_t(std::stoull(digits));
}

// Writes tokens as PREFIX_split_000000.bin, ... of at most shard_tokens each and
// removes higher-numbered shards of the same prefix and split left by an earlier
// run, so a glob over the directory sees exactly this run's data. Returns the
// shard count.
size_t write_split(std::span<const uint16_t> tokens, const Options& opt, const char* split) {
  size_t shards = 0;
  for (size_t first = 0; first < tokens.size(); first += size_t(opt.shard_tokens), ++shards) {
    const size_t n = std::min(size_t(opt.shard_tokens), tokens.size() - first);
    write_bin_shard((fs::path(opt.out_dir) / shard_name(opt.name, split, shards)).string(),
                    tokens.subspan(first, n));
  }
  for (const auto& entry : fs::directory_iterator(opt.out_dir)) {
    const std::optional<size_t> index =
        shard_index(entry.path().filename().string(), opt.name + "_" + split + "_");
    if (entry.is_regular_file() && index && *index >= shards) {
      fs::remove(entry.path());
      std::printf("removed stale shard %s\n", entry.path().c_str());
    }
  }
  return shards;
}

void validate(Options& opt) {
  if (!(opt.val_fraction >= 0.0 && opt.val_fraction < 1.0))
    throw UsageError(strprintf("--val-fraction %g: expected a value in [0, 1)", opt.val_fraction));
  if (opt.name.empty()) opt.name = fs::path(opt.inputs.front()).stem().string();
  if (opt.name.empty() || opt.name.find('/') != std::string::npos)
    throw UsageError("--name '" + opt.name +
                     "': expected a non-empty file-name prefix without '/'");
}

void make_out_dir(const std::string& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (!fs::is_directory(dir))
    throw UsageError("--out '" + dir + "': cannot create directory" +
                     (ec ? ": " + ec.message() : std::string()));
}

TokenData read_inputs(const std::vector<std::string>& inputs) {
  TokenData all;
  for (const std::string& path : inputs) {
    try {
      TokenData one = load_text_file(path);
      all.tokens.insert(all.tokens.end(), one.tokens.begin(), one.tokens.end());
    } catch (const std::runtime_error& e) {
      throw UsageError(e.what());
    }
  }
  all.vocab_size = 256;
  all.source = inputs.size() == 1 ? inputs.front() : strprintf("%zu inputs", inputs.size());
  return all;
}

int run(Options opt) {
  validate(opt);
  TokenData all = read_inputs(opt.inputs);
  const size_t total = all.tokens.size();
  DataSplits splits;
  try {
    splits = split_tail(std::move(all), opt.val_fraction);
  } catch (const std::invalid_argument& e) {
    throw UsageError(e.what());
  }
  if (opt.val_fraction > 0 && splits.val.tokens.empty()) {
    throw UsageError(strprintf("--val-fraction %g of %zu tokens rounds to an empty val split",
                               opt.val_fraction, total));
  }
  make_out_dir(opt.out_dir);  // only once the inputs are known to be good
  const size_t train_shards = write_split(splits.train.tokens, opt, "train");
  const size_t val_shards = write_split(splits.val.tokens, opt, "val");

  const std::string base = (fs::path(opt.out_dir) / opt.name).string();
  std::printf("sr-prep: %zu input file%s, %zu bytes -> %zu tokens (byte-level, vocab 256)\n",
              opt.inputs.size(), opt.inputs.size() == 1 ? "" : "s", total, total);
  std::printf("  train %12zu tokens %4zu shard%s  %s_train_*.bin\n", splits.train.tokens.size(),
              train_shards, train_shards == 1 ? " " : "s", base.c_str());
  if (val_shards) {
    std::printf("  val   %12zu tokens %4zu shard%s  %s_val_*.bin\n", splits.val.tokens.size(),
                val_shards, val_shards == 1 ? " " : "s", base.c_str());
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"sr-prep: text files -> byte-level llm.c .bin token shards (train/val)"};
  app.set_version_flag("--version", std::string("sr-prep ") + SRKIT_VERSION);
  Options opt;
  app.add_option("inputs", opt.inputs, "UTF-8 text files, concatenated in the order given")
      ->required()
      ->check(CLI::ExistingFile);
  app.add_option("--out", opt.out_dir, "output directory (created if missing)")->required();
  app.add_option("--shard-tokens", opt.shard_tokens, "tokens per shard at most")
      ->check(CLI::Range(int64_t(1), int64_t(std::numeric_limits<int32_t>::max())))
      ->capture_default_str();
  app.add_option("--val-fraction", opt.val_fraction,
                 "tail fraction of the tokens kept for val, in [0, 1)")
      ->capture_default_str();
  app.add_option("--name", opt.name, "shard file prefix (default: first input's file stem)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help, --version
    std::fprintf(stderr, "sr-prep: error: %s (see --help)\n", e.what());
    return 2;
  }
  try {
    return run(std::move(opt));
  } catch (const UsageError& e) {
    std::fprintf(stderr, "sr-prep: error: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "sr-prep: error: %s\n", e.what());
    return 1;
  }
}

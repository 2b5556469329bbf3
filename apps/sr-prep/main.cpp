// sr-prep: text files -> llm.c .bin shards, split into train and val (the
// tail); a trainer then reads the glob DIR/PREFIX_train_*.bin. Tokens are bytes
// (vocab 256) or, with a GPT-2-style tokenizer, byte-level BPE ids with an
// end-of-text token before each document. DIR/PREFIX_tokenizer_info.json
// records which (lib/data/tokenizer_info.h).
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

#include "apps/sr-prep/tokenize_inputs.h"
#include "lib/data/bin_shard.h"
#include "lib/data/bpe_tokenizer.h"
#include "lib/data/token_data.h"
#include "lib/data/tokenizer_files.h"
#include "lib/data/tokenizer_info.h"
#include "lib/train/memory_check.h"
#include "lib/util/atomic_file.h"
#include "lib/util/format.h"
#include "lib/util/output_path.h"

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
  std::string name;           // default: stem of the first input
  std::string tokenizer;      // tokenizer.json
  std::string vocab, merges;  // or GPT-2's vocab.json + merges.txt
  std::string doc_separator;  // splits files into documents
};

// The .bin format stores uint16 tokens (lib/data/bin_shard.h).
constexpr int kMaxBinVocab = 65536;

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
  if (opt.tokenizer.empty() && opt.vocab.empty() && !opt.doc_separator.empty())
    throw UsageError(
        "--doc-separator needs a tokenizer (--tokenizer or --vocab/--merges): "
        "byte-level shards have no end-of-text token");
  if (!(opt.val_fraction >= 0.0 && opt.val_fraction < 1.0))
    throw UsageError(strprintf("--val-fraction %g: expected a value in [0, 1)", opt.val_fraction));
  if (opt.name.empty()) opt.name = fs::path(opt.inputs.front()).stem().string();
  if (opt.name.empty() || opt.name.find('/') != std::string::npos)
    throw UsageError("--name '" + opt.name +
                     "': expected a non-empty file-name prefix without '/'");
}

// Created and checked writable (a read-only folder is bad usage, exit 2, found
// before the first shard is written).
void make_out_dir(const std::string& dir) {
  try {
    prepare_output_dir("--out", dir);
  } catch (const std::invalid_argument& e) {
    throw UsageError(e.what());
  }
}

// The tokenizer the flags name, if any; its ids must fit the shards' uint16.
std::optional<LoadedTokenizer> load_flag_tokenizer(const Options& opt) {
  const std::string flag = opt.tokenizer.empty() ? "--vocab/--merges" : "--tokenizer";
  std::optional<LoadedTokenizer> t;
  try {
    if (!opt.tokenizer.empty()) t = load_tokenizer(opt.tokenizer);
    if (!opt.vocab.empty()) t = load_vocab_merges(opt.vocab, opt.merges);
  } catch (const std::runtime_error& e) {
    throw UsageError(flag + ": " + e.what());
  }
  if (t && t->model.vocab_size() > kMaxBinVocab) {
    throw UsageError(
        strprintf("%s: %s has %d tokens; .bin shards hold uint16 tokens, so at most %d",
                  flag.c_str(), t->source.c_str(), t->model.vocab_size(), kMaxBinVocab));
  }
  return t;
}

void write_record(const Options& opt, const std::optional<LoadedTokenizer>& loaded,
                  const TokenizedInputs& in, const DataSplits& splits) {
  nlohmann::json inputs = nlohmann::json::array();
  for (const std::string& p : opt.inputs)
    inputs.push_back(fs::absolute(p).lexically_normal().string());
  const nlohmann::json record = {
      {"tokenizer", loaded ? tokenizer_info_of(*loaded).to_json() : TokenizerInfo{}.to_json()},
      {"inputs", inputs},
      {"documents", in.documents},
      {"doc_separator", opt.doc_separator},
      {"input_bytes", in.bytes},
      {"train_tokens", splits.train.tokens.size()},
      {"val_tokens", splits.val.tokens.size()},
  };
  // Paths and the separator need not be UTF-8; JSON strings must be.
  const std::string text =
      record.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  write_file_atomic(tokenizer_info_path(opt.out_dir, opt.name), text.data(), text.size());
}

int run(Options opt) {
  validate(opt);
  const std::optional<LoadedTokenizer> loaded = load_flag_tokenizer(opt);
  std::optional<BpeTokenizer> tokenizer;
  if (loaded) tokenizer.emplace(loaded->model);
  // Each input byte is held once as text and once as (at most) a 2-byte token
  // while it is encoded: refuse what cannot fit before reading any of it.
  uint64_t input_bytes = 0;
  for (const std::string& path : opt.inputs) {
    std::error_code ec;
    input_bytes += uint64_t(fs::file_size(path, ec));
  }
  try {
    require_memory("the inputs", 3 * input_bytes, human_bytes(input_bytes) + " of text",
                   available_host_memory(), "prepare the data in parts (several --name)");
  } catch (const std::invalid_argument& e) {
    throw UsageError(e.what());
  }
  TokenizedInputs in;
  try {
    in = tokenize_inputs(opt.inputs, tokenizer ? &*tokenizer : nullptr, opt.doc_separator);
  } catch (const std::runtime_error& e) {
    throw UsageError(e.what());
  }
  if (in.tokens.empty()) {
    throw UsageError("--doc-separator '" + opt.doc_separator +
                     "': the inputs hold nothing but separators");
  }
  TokenData all;
  all.tokens = std::move(in.tokens);
  all.vocab_size = loaded ? loaded->model.vocab_size() : 256;
  all.source =
      opt.inputs.size() == 1 ? opt.inputs.front() : strprintf("%zu inputs", opt.inputs.size());
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
  write_record(opt, loaded, in, splits);

  const std::string base = (fs::path(opt.out_dir) / opt.name).string();
  const std::string files =
      strprintf("%zu input file%s", opt.inputs.size(), opt.inputs.size() == 1 ? "" : "s");
  if (loaded) {
    std::printf(
        "sr-prep: %s, %zu document%s, %zu bytes -> %zu tokens (BPE %s, vocab %d, "
        "end-of-text %d before each document)\n",
        files.c_str(), in.documents, in.documents == 1 ? "" : "s", in.bytes, total,
        loaded->source.c_str(), loaded->model.vocab_size(), loaded->model.end_of_text);
  } else {
    std::printf("sr-prep: %s, %zu bytes -> %zu tokens (byte-level, vocab 256)\n", files.c_str(),
                in.bytes, total);
  }
  std::printf("  train %12zu tokens %4zu shard%s  %s_train_*.bin\n", splits.train.tokens.size(),
              train_shards, train_shards == 1 ? " " : "s", base.c_str());
  if (val_shards) {
    std::printf("  val   %12zu tokens %4zu shard%s  %s_val_*.bin\n", splits.val.tokens.size(),
                val_shards, val_shards == 1 ? " " : "s", base.c_str());
  }
  std::printf("  record %s\n", tokenizer_info_path(opt.out_dir, opt.name).c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "sr-prep: text files -> llm.c .bin token shards (train/val), byte-level or with a "
      "GPT-2-style BPE tokenizer"};
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
  CLI::Option* tokenizer =
      app.add_option(
             "--tokenizer", opt.tokenizer,
             "Hugging Face tokenizer.json (BPE model, ByteLevel pre-tokenizer, as GPT-2's); "
             "default: byte-level tokens")
          ->check(CLI::ExistingFile);
  CLI::Option* vocab = app.add_option("--vocab", opt.vocab, "GPT-2 vocab.json (with --merges)")
                           ->check(CLI::ExistingFile);
  CLI::Option* merges = app.add_option("--merges", opt.merges, "GPT-2 merges.txt (with --vocab)")
                            ->check(CLI::ExistingFile);
  vocab->needs(merges);
  merges->needs(vocab);
  tokenizer->excludes(vocab)->excludes(merges);
  app.add_option("--doc-separator", opt.doc_separator,
                 "split each input into documents at this string (e.g. '<|endoftext|>'); "
                 "default: each file is one document");
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
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "sr-prep: error: out of memory while preparing the data\n");
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "sr-prep: error: %s\n", e.what());
    return 1;
  }
}

// Byte-level BPE encoding speed (lib/data/bpe_tokenizer.h), one thread, in
// input bytes per second. The text is pseudo-English generated from a fixed
// seed (a Zipf-distributed lexicon of made-up words, sentences with
// capitals, punctuation, numbers, contractions and paragraphs), and
// tinyshakespeare when ../shared/data has it. The tokenizer is trained on the
// text itself (lib/data/bpe_trainer.h) with 4000 merges, a vocabulary of the
// size GPT-2's has on such text after its most frequent merges.
//   Encode/warm: a tokenizer that has seen the text (its chunk cache is full)
//   Encode/cold: a fresh tokenizer per pass (every distinct chunk is merged once)
//   Pretokenize: the regex split alone
#include <benchmark/benchmark.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "lib/data/bpe_tokenizer.h"
#include "lib/data/bpe_trainer.h"
#include "lib/data/pretokenize.h"

namespace {

constexpr size_t kTextBytes = size_t(8) << 20;
constexpr int kMerges = 4000;

std::string pseudo_english(size_t bytes, uint32_t seed) {
  std::mt19937 rng(seed);
  const std::vector<std::string> syllables = {
      "the", "an", "re", "in", "er", "on", "at", "en", "ed", "es", "or", "te", "ti", "is",
      "it",  "ar", "st", "to", "nt", "ng", "se", "ha", "as", "ou", "io", "le", "ve", "co",
      "me",  "de", "hi", "ri", "ro", "ic", "ne", "ea", "ra", "ce", "li", "ch", "ll", "be",
      "ma",  "si", "om", "ur", "ca", "el", "ta", "la", "ns", "di", "fo", "ho", "pe", "ec"};
  std::vector<std::string> lexicon;
  for (int w = 0; w < 20000; ++w) {
    std::string word;
    const int n = 1 + int(rng() % 4);
    for (int k = 0; k < n; ++k) word += syllables[rng() % syllables.size()];
    lexicon.push_back(word);
  }
  // Zipf: word of rank r drawn with probability proportional to 1 / (r + 1).
  std::vector<double> weights(lexicon.size());
  for (size_t r = 0; r < weights.size(); ++r) weights[r] = 1.0 / double(r + 1);
  std::discrete_distribution<size_t> pick(weights.begin(), weights.end());
  const char* contractions[] = {"'s", "'t", "'re", "'ll", "'d", "'ve"};
  std::string text;
  while (text.size() < bytes) {
    const int words = 4 + int(rng() % 16);
    for (int w = 0; w < words; ++w) {
      std::string word = lexicon[pick(rng)];
      if (w == 0) word[0] = char(word[0] - 'a' + 'A');
      if (rng() % 25 == 0) word = std::to_string(rng() % 2000);
      if (rng() % 30 == 0) word += contractions[rng() % 6];
      text += (w == 0 ? "" : " ") + word;
      if (w + 1 < words && rng() % 9 == 0) text += ",";
    }
    text += rng() % 8 == 0 ? "?" : ".";
    text += rng() % 6 == 0 ? "\n\n" : " ";
  }
  return text;
}

struct Corpus {
  std::string text;
  srkit::BpeModel model;
};

const Corpus& corpus(const std::string& name) {
  static std::map<std::string, Corpus> cache;
  auto it = cache.find(name);
  if (it != cache.end()) return it->second;
  Corpus c;
  if (name == "pseudo_english") {
    c.text = pseudo_english(kTextBytes, 42);
  } else {
    std::ifstream in(std::string(SRKIT_SOURCE_DIR) + "/../shared/data/tinyshakespeare.txt",
                     std::ios::binary);
    c.text.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  c.model = srkit::build_bpe_model(srkit::train_bpe(c.text.substr(0, size_t(1) << 20), kMerges));
  return cache.emplace(name, std::move(c)).first->second;
}

void report(benchmark::State& state, const Corpus& c, size_t tokens) {
  state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(c.text.size()));
  state.counters["bytes_per_token"] = double(c.text.size()) / double(tokens);
  state.counters["vocab"] = c.model.vocab_size();
}

void BM_Encode_Warm(benchmark::State& state, const std::string& name) {
  const Corpus& c = corpus(name);
  srkit::BpeTokenizer tokenizer(c.model);
  std::vector<int32_t> ids;
  tokenizer.encode(c.text, ids);  // fills the cache
  for (auto _ : state) {
    ids.clear();
    tokenizer.encode(c.text, ids);
    benchmark::DoNotOptimize(ids.data());
  }
  report(state, c, ids.size());
}

void BM_Encode_Cold(benchmark::State& state, const std::string& name) {
  const Corpus& c = corpus(name);
  std::vector<int32_t> ids;
  for (auto _ : state) {
    state.PauseTiming();
    srkit::BpeTokenizer tokenizer(c.model);
    ids.clear();
    state.ResumeTiming();
    tokenizer.encode(c.text, ids);
    benchmark::DoNotOptimize(ids.data());
  }
  report(state, c, ids.size());
}

void BM_Pretokenize(benchmark::State& state, const std::string& name) {
  const Corpus& c = corpus(name);
  size_t chunks = 0;
  for (auto _ : state) {
    chunks = 0;
    srkit::PretokenSplitter splitter(c.text);
    std::string_view chunk;
    while (splitter.next(chunk)) ++chunks;
    benchmark::DoNotOptimize(chunks);
  }
  state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(c.text.size()));
  state.counters["bytes_per_chunk"] = double(c.text.size()) / double(chunks);
}

const bool registered = [] {
  std::vector<std::string> names = {"pseudo_english"};
  if (std::filesystem::exists(std::string(SRKIT_SOURCE_DIR) +
                              "/../shared/data/tinyshakespeare.txt")) {
    names.push_back("tinyshakespeare");
  }
  for (const std::string& n : names) {
    benchmark::RegisterBenchmark(("Encode/warm/" + n).c_str(), BM_Encode_Warm, n)
        ->Unit(benchmark::kMillisecond);
    benchmark::RegisterBenchmark(("Encode/cold/" + n).c_str(), BM_Encode_Cold, n)
        ->Unit(benchmark::kMillisecond);
    benchmark::RegisterBenchmark(("Pretokenize/" + n).c_str(), BM_Pretokenize, n)
        ->Unit(benchmark::kMillisecond);
  }
  return true;
}();

}  // namespace

BENCHMARK_MAIN();

#include "lib/data/bpe_tokenizer.h"

#include <algorithm>
#include <stdexcept>

#include "lib/data/pretokenize.h"

namespace srkit {

namespace {

// Chunks longer than this (long whitespace runs, huge "words") are merged
// every time rather than cached, and the cache starts over once it holds this
// many chunks: memory stays bounded on any input.
constexpr size_t kMaxCachedChunkBytes = 64;
constexpr size_t kMaxCachedChunks = size_t(1) << 20;

uint64_t pair_key(int32_t left, int32_t right) {
  return uint64_t(uint32_t(left)) << 32 | uint32_t(right);
}

// Min-heap order of candidates: lowest rank first, then leftmost.
struct Later {
  template <class Candidate>
  bool operator()(const Candidate& a, const Candidate& b) const {
    return a.rank != b.rank ? a.rank > b.rank : a.pos > b.pos;
  }
};

}  // namespace

BpeTokenizer::BpeTokenizer(BpeModel model) : model_(std::move(model)) {
  rule_.reserve(model_.merges.size());
  for (size_t rank = 0; rank < model_.merges.size(); ++rank) {
    const BpeMerge& m = model_.merges[rank];
    rule_.emplace(pair_key(m.left, m.right), MergeRule{uint32_t(rank), m.merged});
  }
}

void BpeTokenizer::encode(std::string_view text, std::vector<int32_t>& out) {
  PretokenSplitter splitter(text);
  std::string_view chunk;
  while (splitter.next(chunk)) encode_chunk(chunk, out);
}

std::vector<int32_t> BpeTokenizer::encode(std::string_view text) {
  std::vector<int32_t> out;
  encode(text, out);
  return out;
}

void BpeTokenizer::encode_chunk(std::string_view chunk, std::vector<int32_t>& out) {
  if (chunk.size() == 1) {
    out.push_back(model_.byte_token[static_cast<unsigned char>(chunk[0])]);
    return;
  }
  if (chunk.size() > kMaxCachedChunkBytes) {
    apply_merges(chunk, out);
    return;
  }
  if (const auto hit = cache_.find(chunk); hit != cache_.end()) {
    const auto [offset, count] = hit->second;
    out.insert(out.end(), cached_ids_.begin() + offset, cached_ids_.begin() + offset + count);
    return;
  }
  if (cache_.size() >= kMaxCachedChunks) {
    cache_.clear();
    cached_ids_.clear();
  }
  const size_t first = out.size();
  apply_merges(chunk, out);
  cache_.emplace(std::string(chunk), std::pair<uint32_t, uint32_t>(uint32_t(cached_ids_.size()),
                                                                   uint32_t(out.size() - first)));
  cached_ids_.insert(cached_ids_.end(), out.begin() + std::ptrdiff_t(first), out.end());
}

void BpeTokenizer::push_candidate(int32_t pos) {
  if (pos < 0) return;
  const int32_t next = symbols_[pos].next;
  if (next < 0) return;
  const int32_t left = symbols_[pos].id, right = symbols_[next].id;
  const auto rule = rule_.find(pair_key(left, right));
  if (rule == rule_.end()) return;
  heap_.push_back({rule->second.rank, pos, left, right});
  std::push_heap(heap_.begin(), heap_.end(), Later{});
}

// GPT-2's loop: take the pair of lowest rank present and merge every
// non-overlapping occurrence of it, left to right; repeat until no pair has a
// rank. A heap of candidate pairs, checked when popped, makes it O(n log n)
// in the chunk length n instead of GPT-2's O(n^2). All occurrences of one
// rank are merged before the pairs they create are offered, as GPT-2 does.
void BpeTokenizer::apply_merges(std::string_view chunk, std::vector<int32_t>& out) {
  const int32_t n = int32_t(chunk.size());
  symbols_.resize(size_t(n));
  for (int32_t i = 0; i < n; ++i) {
    symbols_[i] = {model_.byte_token[static_cast<unsigned char>(chunk[i])], i - 1,
                   i + 1 < n ? i + 1 : -1};
  }
  heap_.clear();
  for (int32_t i = 0; i + 1 < n; ++i) push_candidate(i);
  while (!heap_.empty()) {
    const uint32_t rank = heap_.front().rank;
    merged_at_.clear();
    while (!heap_.empty() && heap_.front().rank == rank) {
      std::pop_heap(heap_.begin(), heap_.end(), Later{});
      const Candidate c = heap_.back();
      heap_.pop_back();
      Symbol& left = symbols_[c.pos];
      if (left.id != c.left || left.next < 0) continue;  // merged away or changed since
      Symbol& right = symbols_[left.next];
      if (right.id != c.right) continue;
      left.id = model_.merges[rank].merged;
      right.id = -1;
      left.next = right.next;
      if (left.next >= 0) symbols_[left.next].prev = c.pos;
      merged_at_.push_back(c.pos);
    }
    for (int32_t pos : merged_at_) {
      push_candidate(symbols_[pos].prev);
      push_candidate(pos);
    }
  }
  for (int32_t i = 0; i >= 0; i = symbols_[i].next) out.push_back(symbols_[i].id);
}

std::string BpeTokenizer::decode(std::span<const int32_t> ids) const {
  std::string out;
  for (int32_t id : ids) {
    if (!has_token(id)) {
      throw std::out_of_range("token id " + std::to_string(id) +
                              " has no token in the tokenizer (vocabulary size " +
                              std::to_string(vocab_size()) + ")");
    }
    out += model_.token_bytes[id];
  }
  return out;
}

}  // namespace srkit

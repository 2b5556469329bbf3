// Training windows and evaluation windows over a token stream.
#pragma once

#include <cstddef>
#include <cstdint>

#include "lib/data/token_data.h"

namespace srkit {

// Random training windows. The start of sample s of global batch b is a pure
// function of (seed, b, s): Philox keyed by the seed with counter
// (s, purpose RngPurpose::kDataWindows << 48 | b), i.e. sr_block(seed, purpose, b, s),
// mapped uniformly onto [0, n - seq_len - 1]. Resuming needs only the batch
// counter, and any split of a global batch over ranks (first_sample, count)
// sees the same windows. b must stay below 2^48.
//
// The sampler keeps a reference to `data`, which must outlive it (binding a
// temporary is rejected at compile time).
class BatchSampler {
 public:
  BatchSampler(const TokenData& data, int seq_len, uint64_t seed);
  BatchSampler(TokenData&&, int, uint64_t) = delete;

  // Fills `count` rows of seq_len inputs and targets (targets = inputs shifted by
  // one token) for samples first_sample .. first_sample+count-1 of batch batch_index.
  void fill(uint64_t batch_index, uint64_t first_sample, int count, int32_t* inputs,
            int32_t* targets) const;

  // The first token of that sample's window (inputs are tokens[start .. start+seq_len)).
  uint64_t window_start(uint64_t batch_index, uint64_t sample) const;

  int seq_len() const { return seq_len_; }
  // Number of distinct window starts: n - seq_len.
  uint64_t num_starts() const { return num_starts_; }

 private:
  const TokenData& data_;
  int seq_len_;
  uint64_t seed_;
  uint64_t num_starts_;
};

// Evaluation: fixed, non-overlapping windows in stream order, window w taking
// inputs tokens[w*T .. w*T+T) and targets tokens[w*T+1 .. w*T+T]; count() =
// (n - 1) / T, the trailing remainder is unused. The same every time.
class EvalWindows {
 public:
  EvalWindows(const TokenData& data, int seq_len);
  EvalWindows(TokenData&&, int) = delete;

  size_t count() const { return count_; }
  // Windows first_window .. first_window+count-1; throws if past count().
  void fill(size_t first_window, int count, int32_t* inputs, int32_t* targets) const;

 private:
  const TokenData& data_;
  int seq_len_;
  size_t count_;
};

}  // namespace srkit

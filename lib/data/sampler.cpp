#include "lib/data/sampler.h"

#include <stdexcept>

#include "lib/data/data_rng.h"
#include "lib/util/format.h"

namespace srkit {
namespace {

void check_length(const TokenData& data, int seq_len) {
  if (seq_len < 1) throw std::invalid_argument(strprintf("seq_len %d must be at least 1", seq_len));
  if (data.tokens.size() < size_t(seq_len) + 1) {
    throw std::invalid_argument(strprintf("data file %s has %zu tokens; need at least %d+1",
                                          data.source.c_str(), data.tokens.size(), seq_len));
  }
}

// One window: inputs are tokens[start, start+T), targets tokens[start+1, start+T].
void copy_window(const TokenData& data, size_t start, int seq_len, int32_t* inputs,
                 int32_t* targets) {
  const uint16_t* src = data.tokens.data() + start;
  for (int t = 0; t < seq_len; ++t) {
    inputs[t] = src[t];
    targets[t] = src[t + 1];
  }
}

}  // namespace

BatchSampler::BatchSampler(const TokenData& data, int seq_len, uint64_t seed)
    : data_(data), seq_len_(seq_len), seed_(seed) {
  check_length(data, seq_len);
  num_starts_ = data.tokens.size() - size_t(seq_len);
}

uint64_t BatchSampler::window_start(uint64_t batch_index, uint64_t sample) const {
  const Philox4 block = sr_block(seed_, RngPurpose::kDataWindows, batch_index, sample);
  return uniform_below(philox_u64(block), num_starts_);
}

void BatchSampler::fill(uint64_t batch_index, uint64_t first_sample, int count, int32_t* inputs,
                        int32_t* targets) const {
  if (count < 0) throw std::invalid_argument(strprintf("sample count %d is negative", count));
  check_sr_step("BatchSampler", batch_index);  // the batch index is the stream's step
  for (int i = 0; i < count; ++i) {
    const size_t row = size_t(i) * size_t(seq_len_);
    copy_window(data_, window_start(batch_index, first_sample + uint64_t(i)), seq_len_,
                inputs + row, targets + row);
  }
}

EvalWindows::EvalWindows(const TokenData& data, int seq_len) : data_(data), seq_len_(seq_len) {
  check_length(data, seq_len);
  count_ = (data.tokens.size() - 1) / size_t(seq_len);
}

void EvalWindows::fill(size_t first_window, int count, int32_t* inputs, int32_t* targets) const {
  if (count < 0 || first_window > count_ || size_t(count) > count_ - first_window) {
    throw std::out_of_range(
        strprintf("eval windows: %d from window %zu requested; %s has %zu "
                  "windows of %d tokens",
                  count, first_window, data_.source.c_str(), count_, seq_len_));
  }
  for (int i = 0; i < count; ++i) {
    const size_t row = size_t(i) * size_t(seq_len_);
    copy_window(data_, (first_window + size_t(i)) * size_t(seq_len_), seq_len_, inputs + row,
                targets + row);
  }
}

}  // namespace srkit

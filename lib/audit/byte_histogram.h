// Histogram of small byte values over a fixed block, counted by vector
// compares instead of a scatter of increments. RoundingStats::add_batch
// counts two histograms per input and mode (error bin, round-ups per fraction
// bucket); as scattered increments those were a third of `sr-audit cast`'s
// time, bound by the chain of loads and stores into the counters, not by
// arithmetic. Counts are integers, so the result is the same on every path.
#pragma once

#include <cstddef>
#include <cstdint>

namespace srkit::audit {

constexpr size_t kByteHistogramBlock = 256;

// counts[k] += the number of i < kByteHistogramBlock with v[i] == k, for
// k < values (values <= 255). Bytes >= values are ignored: pad with 0xff.
void add_byte_histogram(const uint8_t* v, int values, uint32_t* counts);
// The same, counting only the i with weight[i] == 1 (weights are 0 or 1).
void add_weighted_byte_histogram(const uint8_t* v, const uint8_t* weight, int values,
                                 uint32_t* counts);

}  // namespace srkit::audit

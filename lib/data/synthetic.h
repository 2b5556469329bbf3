// A deterministic byte-level corpus for smoke runs and tests without real data.
#pragma once

#include <cstddef>
#include <cstdint>

#include "lib/data/token_data.h"

namespace srkit {

// n_bytes of ASCII text, a pure function of the seed (vocab 256, source
// "synthetic"); a longer corpus of the same seed extends a shorter one.
// One item per line, mixing parts a small byte-level model learns quickly with
// parts that stay random, so the loss has somewhere to fall and a floor:
//   sentences from small word lists with a fixed grammar    "The red fox sees a small bird."
//   recurring phrases, verbatim                             "to be or not to be, that is the
//   question." sums and products (the answer is predictable)           "12+7=19."  "6*7=42."
//   counting runs                                           "count from 17: 17 18 19 20."
//   spelling (copying a word letter by letter)              "fox is spelled f-o-x."
// Word and number choices are uniform random, which is the floor.
TokenData synthetic_corpus(uint64_t seed, size_t n_bytes);

}  // namespace srkit

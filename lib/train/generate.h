// Sampling text from a trained model, deterministic from a seed.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "lib/model/gpt.h"

namespace srkit {

// Appends n tokens to prompt by ancestral sampling (temperature 1) from the
// model, over a sliding window of at most window tokens. The uniform draws come
// from Philox keyed by the seed, so the same model and seed give the same text.
// Throws Interrupted (lib/util/stop_signal.h) when a stop signal arrives.
std::vector<int32_t> generate(GPT& model, std::vector<int32_t> prompt, int n, int window,
                              uint64_t seed);

// Byte tokens as text with non-printable bytes escaped; token ids (vocab > 256)
// as "<id>" since no tokenizer ships with srkit.
std::string tokens_to_text(const std::vector<int32_t>& tokens, int vocab_size);

}  // namespace srkit

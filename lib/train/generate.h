// Sampling text from a trained model, deterministic from a seed.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "lib/model/gpt.h"

namespace srkit {

class BpeTokenizer;

// Appends n tokens to prompt by ancestral sampling (temperature 1) from the
// model, over a sliding window of at most window tokens. The uniform draws come
// from Philox keyed by the seed, so the same model and seed give the same text.
// Throws Interrupted (lib/util/stop_signal.h) when a stop signal arrives.
std::vector<int32_t> generate(GPT& model, std::vector<int32_t> prompt, int n, int window,
                              uint64_t seed);

// Tokens as text, non-printable bytes escaped: with a tokenizer the bytes its
// tokens stand for (ids it has no token for, such as a model vocabulary padded
// past the tokenizer's, as "<id>"); without one, byte tokens as bytes when
// vocab_size <= 256, else every token as "<id>".
std::string tokens_to_text(const std::vector<int32_t>& tokens, int vocab_size,
                           const BpeTokenizer* tokenizer = nullptr);

}  // namespace srkit

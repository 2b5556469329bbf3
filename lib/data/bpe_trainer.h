// A small byte-level BPE trainer, for tests and benchmarks that need a
// realistic tokenizer without downloading one. GPT-2's recipe in its simplest
// form: count the pre-token chunks of the text, then repeatedly merge the most
// frequent adjacent pair of tokens inside the chunks.
#pragma once

#include <string_view>

#include "lib/data/bpe_model.h"

namespace srkit {

// Up to num_merges merges (fewer when no pair occurs twice any more). Ties in
// frequency go to the pair whose bytes compare smallest, so the result depends
// on the text only. Vocab ids: the 256 byte tokens in GPT-2's order (by symbol
// code point), then the merged tokens in the order they were made (two merges
// that spell the same bytes make one token), then <|endoftext|>.
BpeSpec train_bpe(std::string_view text, int num_merges);

}  // namespace srkit

// sr-train --tokenizer: the tokenizer that turns the sample generated at the
// end of a run into text (token ids are printed as "<id>" without one).
#pragma once

#include <memory>
#include <string>

#include "lib/data/bpe_tokenizer.h"

namespace srkit {

// Loads the tokenizer at path (lib/data/tokenizer_files.h: load_tokenizer) and
// checks that its vocabulary fits the model's; both failures throw
// std::invalid_argument naming --tokenizer. If the data has a tokenizer record
// (lib/data/tokenizer_info.h) that names another tokenizer, or cannot be read,
// `warning` says so; otherwise it is left empty.
std::unique_ptr<BpeTokenizer> open_sample_tokenizer(const std::string& path, int model_vocab,
                                                    const std::string& data, std::string& warning);

}  // namespace srkit

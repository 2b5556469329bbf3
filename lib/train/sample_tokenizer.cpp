#include "lib/train/sample_tokenizer.h"

#include <stdexcept>

#include "lib/data/tokenizer_files.h"
#include "lib/data/tokenizer_info.h"

namespace srkit {

std::unique_ptr<BpeTokenizer> open_sample_tokenizer(const std::string& path, int model_vocab,
                                                    const std::string& data, std::string& warning) {
  warning.clear();
  LoadedTokenizer loaded;
  try {
    loaded = load_tokenizer(path);
  } catch (const std::runtime_error& e) {
    throw std::invalid_argument(std::string("--tokenizer: ") + e.what());
  }
  if (loaded.model.vocab_size() > model_vocab) {
    throw std::invalid_argument(
        "--tokenizer '" + path + "' has " + std::to_string(loaded.model.vocab_size()) +
        " tokens but the model's vocabulary is " + std::to_string(model_vocab) + " (set --vocab)");
  }
  try {
    const std::optional<TokenizerInfo> info = find_tokenizer_info(data);
    if (info && info->type != "bpe") {
      warning = "--tokenizer '" + path + "' given, but the data " + data +
                " was prepared with the " + info->type + " tokenizer";
    } else if (info && info->fingerprint != loaded.fingerprint) {
      const std::string made_with = info->files.empty() ? "?" : info->files.front().path;
      warning = "--tokenizer '" + path + "' (fingerprint " + loaded.fingerprint.substr(0, 12) +
                ") is not the tokenizer the data " + data + " was prepared with (" + made_with +
                ", fingerprint " + info->fingerprint.substr(0, 12) + ")";
    }
  } catch (const std::runtime_error& e) {
    warning = std::string("cannot check --tokenizer against the data: ") + e.what();
  }
  return std::make_unique<BpeTokenizer>(std::move(loaded.model));
}

}  // namespace srkit

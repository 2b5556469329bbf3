#include "lib/data/tokenizer_info.h"

#include <filesystem>
#include <fstream>
#include <stdexcept>

namespace srkit {

namespace fs = std::filesystem;

nlohmann::json TokenizerInfo::to_json() const {
  nlohmann::json files_json = nlohmann::json::array();
  for (const TokenizerFile& f : files)
    files_json.push_back({{"path", f.path}, {"sha256", f.sha256}});
  return {{"type", type},
          {"vocab_size", vocab_size},
          {"end_of_text", end_of_text < 0 ? nlohmann::json() : nlohmann::json(end_of_text)},
          {"fingerprint", fingerprint},
          {"files", files_json}};
}

TokenizerInfo TokenizerInfo::from_json(const nlohmann::json& j, const std::string& path) {
  try {
    TokenizerInfo info;
    info.type = j.at("type").get<std::string>();
    info.vocab_size = j.at("vocab_size").get<int>();
    info.end_of_text = j.at("end_of_text").is_null() ? -1 : j.at("end_of_text").get<int32_t>();
    info.fingerprint = j.at("fingerprint").get<std::string>();
    for (const nlohmann::json& f : j.at("files")) {
      info.files.push_back({f.at("path").get<std::string>(), f.at("sha256").get<std::string>()});
    }
    return info;
  } catch (const nlohmann::json::exception& e) {
    throw std::runtime_error("tokenizer record '" + path +
                             "': expected type, vocab_size, end_of_text, fingerprint and files (" +
                             e.what() + ")");
  }
}

TokenizerInfo tokenizer_info_of(const LoadedTokenizer& tokenizer) {
  TokenizerInfo info;
  info.type = "bpe";
  info.vocab_size = tokenizer.model.vocab_size();
  info.end_of_text = tokenizer.model.end_of_text;
  info.fingerprint = tokenizer.fingerprint;
  info.files = tokenizer.files;
  return info;
}

std::string tokenizer_info_path(const std::string& dir, const std::string& name) {
  return (fs::path(dir) / (name + "_tokenizer_info.json")).string();
}

std::optional<TokenizerInfo> find_tokenizer_info(const std::string& data) {
  const fs::path p(data);
  const std::string file = p.filename().string();
  size_t cut = std::string::npos;
  for (const char* split : {"_train_", "_val_"}) {
    const size_t at = file.rfind(split);
    if (at != std::string::npos && at > 0 && (cut == std::string::npos || at > cut)) cut = at;
  }
  if (cut == std::string::npos || !file.ends_with(".bin")) return std::nullopt;
  const std::string path = tokenizer_info_path(p.parent_path().string(), file.substr(0, cut));
  if (!fs::exists(path)) return std::nullopt;
  std::ifstream in(path);
  nlohmann::json j;
  try {
    in >> j;
  } catch (const nlohmann::json::exception& e) {
    throw std::runtime_error("tokenizer record '" + path + "': expected JSON (" + e.what() + ")");
  }
  if (!j.is_object())
    throw std::runtime_error("tokenizer record '" + path + "': expected an object");
  return TokenizerInfo::from_json(j.value("tokenizer", nlohmann::json()), path);
}

}  // namespace srkit

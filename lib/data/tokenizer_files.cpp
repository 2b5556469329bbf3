#include "lib/data/tokenizer_files.h"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string_view>

#include "lib/util/json_text.h"
#include "lib/util/sha256.h"

namespace srkit {

namespace {

using nlohmann::json;

struct FileError : std::runtime_error {
  FileError(const std::string& path, const std::string& what)
      : std::runtime_error("tokenizer file '" + path + "': " + what) {}
  // Problems that only the two files together show (a merge naming a token
  // the vocab lacks).
  FileError(const std::string& vocab_path, const std::string& merges_path, const std::string& what)
      : std::runtime_error("tokenizer files '" + vocab_path + "' and '" + merges_path +
                           "': " + what) {}
};

std::string read_file(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec))
    throw FileError(path, "expected a readable file");
  std::ifstream in(path, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad() || !in.is_open()) throw FileError(path, "cannot be read");
  return bytes;
}

json parse_json(const std::string& path, const std::string& text) {
  try {
    return parse_json_text(text);
  } catch (const std::invalid_argument& e) {
    throw FileError(path, std::string("expected valid JSON: ") + e.what());
  }
}

// vocab: {"token": id, ...}
void read_vocab(const std::string& path, const json& vocab, const char* where, BpeSpec& spec) {
  if (!vocab.is_object())
    throw FileError(path, std::string("expected ") + where + " to be an object of token -> id");
  spec.vocab.reserve(vocab.size());
  for (const auto& [token, id] : vocab.items()) {
    if (!id.is_number_integer()) {
      throw FileError(
          path, std::string("expected an integer id for ") + where + " token '" + token + "'");
    }
    spec.vocab.emplace_back(token, id.get<int64_t>());
  }
}

// "a b" -> (a, b): exactly one space between two non-empty tokens (byte-level
// tokens never hold a space: it is written as 'Ġ').
bool split_merge(std::string_view line, std::pair<std::string, std::string>& out) {
  const size_t space = line.find(' ');
  if (space == std::string_view::npos || space == 0 || space + 1 == line.size() ||
      line.find(' ', space + 1) != std::string_view::npos) {
    return false;
  }
  out = {std::string(line.substr(0, space)), std::string(line.substr(space + 1))};
  return true;
}

// A setting must be absent or hold one of the values that leave GPT-2's encoding unchanged.
void require_default(const std::string& path, const json& obj, const char* key,
                     const std::vector<json>& allowed, const std::string& expected) {
  if (!obj.contains(key)) return;
  for (const json& a : allowed) {
    if (obj[key] == a) return;
  }
  throw FileError(path, std::string("model setting \"") + key + "\" is " + obj[key].dump() +
                            "; expected " + expected);
}

void check_pre_tokenizer(const std::string& path, const json& root) {
  const json pre = root.value("pre_tokenizer", json());
  if (!pre.is_object() || pre.value("type", "") != "ByteLevel") {
    throw FileError(
        path, "pre_tokenizer is " +
                  (pre.is_object() && pre.contains("type") ? pre["type"].dump() : pre.dump()) +
                  "; expected {\"type\": \"ByteLevel\"} (GPT-2's pre-tokenizer)");
  }
  if (pre.value("add_prefix_space", false)) {
    throw FileError(path, "pre_tokenizer add_prefix_space is true; expected false (GPT-2's)");
  }
  if (!pre.value("use_regex", true)) {
    throw FileError(path, "pre_tokenizer use_regex is false; expected true (GPT-2's regex)");
  }
  const json norm = root.value("normalizer", json());
  if (!norm.is_null()) {
    throw FileError(path, "normalizer is " + norm.dump().substr(0, 80) +
                              "; expected null (text is encoded as it is)");
  }
}

// The model of spec, with the files' digests; paths[0] alone or both paths
// are named in the message of a check that fails.
LoadedTokenizer finish(const BpeSpec& spec, const std::vector<std::string>& paths) {
  LoadedTokenizer t;
  try {
    t.model = build_bpe_model(spec);
  } catch (const std::invalid_argument& e) {
    if (paths.size() == 1) throw FileError(paths[0], e.what());
    throw FileError(paths[0], paths[1], e.what());
  }
  t.fingerprint = bpe_fingerprint(t.model);
  for (const std::string& p : paths) {
    t.files.push_back(
        {std::filesystem::absolute(p).lexically_normal().string(), sha256_file_hex(p)});
    t.source += (t.source.empty() ? "" : " + ") + p;
  }
  return t;
}

LoadedTokenizer tokenizer_from_json(const std::string& path, const json& root) {
  if (!root.is_object() || !root.contains("model") || !root["model"].is_object()) {
    throw FileError(path, "expected a tokenizer.json object with a \"model\" object");
  }
  const json& model = root["model"];
  const std::string type =
      model.value("type", json()).is_string() ? model["type"].get<std::string>() : "(none)";
  if (type != "BPE") throw FileError(path, "model type is '" + type + "'; expected 'BPE'");
  check_pre_tokenizer(path, root);
  require_default(path, model, "dropout", {json(), json(0), json(0.0)}, "null (no BPE dropout)");
  require_default(path, model, "continuing_subword_prefix", {json(), json("")}, "null");
  require_default(path, model, "end_of_word_suffix", {json(), json("")}, "null");
  require_default(path, model, "ignore_merges", {json(false)}, "false");

  BpeSpec spec;
  if (!model.contains("vocab")) throw FileError(path, "expected model.vocab");
  read_vocab(path, model["vocab"], "model.vocab", spec);
  const json merges = model.value("merges", json::array());
  if (!merges.is_array()) throw FileError(path, "expected model.merges to be an array");
  spec.merges.reserve(merges.size());
  for (size_t i = 0; i < merges.size(); ++i) {
    const json& m = merges[i];
    std::pair<std::string, std::string> pair;
    if (m.is_string() && split_merge(m.get_ref<const std::string&>(), pair)) {
      spec.merges.push_back(std::move(pair));
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
      spec.merges.emplace_back(m[0].get<std::string>(), m[1].get<std::string>());
    } else {
      throw FileError(path, "merge " + std::to_string(i + 1) + " is " + m.dump().substr(0, 80) +
                                "; expected \"left right\" or [\"left\", \"right\"]");
    }
  }
  const json added = root.value("added_tokens", json::array());
  if (!added.is_array()) throw FileError(path, "expected added_tokens to be an array");
  for (const json& a : added) {
    if (!a.is_object() || !a.contains("id") || !a["id"].is_number_integer() ||
        !a.contains("content") || !a["content"].is_string()) {
      throw FileError(path, "added token " + a.dump().substr(0, 80) +
                                "; expected {\"id\": integer, \"content\": string, ...}");
    }
    spec.added.emplace_back(a["content"].get<std::string>(), a["id"].get<int64_t>());
  }
  return finish(spec, {path});
}

}  // namespace

LoadedTokenizer load_tokenizer_json(const std::string& path) {
  return tokenizer_from_json(path, parse_json(path, read_file(path)));
}

LoadedTokenizer load_vocab_merges(const std::string& vocab_path, const std::string& merges_path) {
  BpeSpec spec;
  read_vocab(vocab_path, parse_json(vocab_path, read_file(vocab_path)), "the vocab", spec);
  const std::string text = read_file(merges_path);
  size_t line_no = 0;
  for (size_t start = 0; start < text.size();) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    std::string_view line(text.data() + start, end - start);
    start = end + 1;
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty() || (line_no == 1 && line.starts_with("#version"))) continue;
    std::pair<std::string, std::string> pair;
    if (!split_merge(line, pair)) {
      throw FileError(merges_path, "line " + std::to_string(line_no) + " is '" +
                                       std::string(line.substr(0, 80)) +
                                       "'; expected two tokens separated by one space");
    }
    spec.merges.push_back(std::move(pair));
  }
  return finish(spec, {vocab_path, merges_path});
}

LoadedTokenizer load_tokenizer(const std::string& path) {
  const json root = parse_json(path, read_file(path));
  if (root.is_object() && root.contains("model")) return tokenizer_from_json(path, root);
  const std::string merges = (std::filesystem::path(path).parent_path() / "merges.txt").string();
  if (!std::filesystem::exists(merges)) {
    throw FileError(path,
                    "expected a tokenizer.json (an object with \"model\"), or a vocab.json "
                    "with merges.txt beside it (" +
                        merges + " does not exist)");
  }
  return load_vocab_merges(path, merges);
}

}  // namespace srkit

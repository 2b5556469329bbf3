#include "apps/sr-prep/tokenize_inputs.h"

#include <string_view>

#include "lib/data/token_data.h"

namespace srkit {

namespace {

void encode_document(std::string_view doc, BpeTokenizer& tokenizer, std::vector<int32_t>& scratch,
                     TokenizedInputs& out) {
  scratch.clear();
  tokenizer.encode(doc, scratch);
  out.tokens.push_back(uint16_t(tokenizer.end_of_text()));
  out.tokens.insert(out.tokens.end(), scratch.begin(), scratch.end());  // ids < 65536: checked
  ++out.documents;
}

}  // namespace

TokenizedInputs tokenize_inputs(const std::vector<std::string>& paths, BpeTokenizer* tokenizer,
                                const std::string& doc_separator) {
  TokenizedInputs out;
  std::vector<int32_t> scratch;
  for (const std::string& path : paths) {
    const std::string text = read_text_file(path);
    out.bytes += text.size();
    if (!tokenizer) {
      out.tokens.insert(out.tokens.end(), reinterpret_cast<const unsigned char*>(text.data()),
                        reinterpret_cast<const unsigned char*>(text.data() + text.size()));
      continue;
    }
    if (doc_separator.empty()) {
      encode_document(text, *tokenizer, scratch, out);
      continue;
    }
    const std::string_view all(text);
    for (size_t start = 0; start <= all.size();) {
      size_t end = all.find(doc_separator, start);
      if (end == std::string_view::npos) end = all.size();
      if (end > start) encode_document(all.substr(start, end - start), *tokenizer, scratch, out);
      start = end + doc_separator.size();
    }
  }
  return out;
}

}  // namespace srkit

#include "lib/train/generate.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "kernels/common/sr_bits.h"
#include "lib/data/bpe_tokenizer.h"
#include "lib/util/stop_signal.h"

namespace srkit {

std::vector<int32_t> generate(GPT& model, std::vector<int32_t> prompt, int n, int window,
                              uint64_t seed) {
  std::vector<int32_t> tokens = std::move(prompt);
  if (tokens.empty()) tokens.push_back(0);
  for (int i = 0; i < n; ++i) {
    throw_if_stopped("sampling");
    const int len = std::min<int>(int(tokens.size()), window);
    const int32_t* ctx = tokens.data() + tokens.size() - len;
    model.forward(ctx, nullptr, 1, len);
    const std::vector<float> logits = model.logits(0, len - 1);
    const float max_logit = *std::max_element(logits.begin(), logits.end());
    std::vector<double> cdf(logits.size());
    double total = 0.0;
    for (size_t v = 0; v < logits.size(); ++v) {
      total += std::exp(double(logits[v]) - double(max_logit));
      cdf[v] = total;
    }
    const Philox4 r = sr_block(seed, RngPurpose::kSample, 0, uint64_t(i));
    const double u = (double(r.v[0]) / 4294967296.0) * total;
    const size_t pick = std::upper_bound(cdf.begin(), cdf.end(), u) - cdf.begin();
    tokens.push_back(int32_t(std::min(pick, cdf.size() - 1)));
  }
  return tokens;
}

std::string tokens_to_text(const std::vector<int32_t>& tokens, int vocab_size,
                           const BpeTokenizer* tokenizer) {
  std::string out;
  const auto append_bytes = [&out](std::string_view bytes) {
    for (char c : bytes) {
      const unsigned b = static_cast<unsigned char>(c);
      if (b == '\n' || (b >= 32 && b < 127) || b >= 128) {
        out += c;  // bytes >= 128 are parts of UTF-8 sequences
      } else {
        char buf[8];
        std::snprintf(buf, sizeof buf, "\\x%02x", b);
        out += buf;
      }
    }
  };
  for (int32_t t : tokens) {
    if (tokenizer && tokenizer->has_token(t)) {
      append_bytes(tokenizer->token_bytes(t));
    } else if (!tokenizer && vocab_size <= 256) {
      const char byte = char(t);
      append_bytes(std::string_view(&byte, 1));
    } else {
      out += '<';  // not "<" + ... + ">": g++ 12 warns falsely (-Wrestrict) on that
      out += std::to_string(t);
      out += '>';
    }
  }
  return out;
}

}  // namespace srkit

#include "lib/train/generate.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "kernels/common/sr_bits.h"
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

std::string tokens_to_text(const std::vector<int32_t>& tokens, int vocab_size) {
  std::string out;
  for (int32_t t : tokens) {
    if (vocab_size > 256) {
      out += "<" + std::to_string(t) + ">";
    } else if (t == '\n' || (t >= 32 && t < 127) || t >= 128) {
      out += char(t);  // bytes >= 128 are parts of UTF-8 sequences
    } else {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", unsigned(t));
      out += buf;
    }
  }
  return out;
}

}  // namespace srkit

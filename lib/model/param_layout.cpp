#include "lib/model/param_layout.h"

#include <stdexcept>

namespace srkit {

ParamLayout::ParamLayout(const GPTConfig& c) {
  const int64_t L = c.num_layers, C = c.channels, Vp = c.padded_vocab_size(), T = c.max_seq_len;
  auto add = [&](const char* name, std::vector<int64_t> shape, bool decay) {
    ParamTensor t;
    t.name = name;
    t.count = 1;
    for (int64_t d : shape) t.count *= size_t(d);
    t.shape = std::move(shape);
    t.offset = total_;
    t.decay = decay;
    total_ += (t.count + kParamAlign - 1) / kParamAlign * kParamAlign;
    tensors_.push_back(std::move(t));
  };
  // Order and names follow GPT-2 / llm.c; per-layer tensors are stacked on a leading L axis.
  add("wte", {Vp, C}, true);
  add("wpe", {T, C}, true);
  add("h.ln_1.weight", {L, C}, false);
  add("h.ln_1.bias", {L, C}, false);
  add("h.attn.c_attn.weight", {L, 3 * C, C}, true);
  add("h.attn.c_attn.bias", {L, 3 * C}, false);
  add("h.attn.c_proj.weight", {L, C, C}, true);
  add("h.attn.c_proj.bias", {L, C}, false);
  add("h.ln_2.weight", {L, C}, false);
  add("h.ln_2.bias", {L, C}, false);
  add("h.mlp.c_fc.weight", {L, 4 * C, C}, true);
  add("h.mlp.c_fc.bias", {L, 4 * C}, false);
  add("h.mlp.c_proj.weight", {L, C, 4 * C}, true);
  add("h.mlp.c_proj.bias", {L, C}, false);
  add("ln_f.weight", {C}, false);
  add("ln_f.bias", {C}, false);
}

const ParamTensor& ParamLayout::get(const std::string& name) const {
  for (const ParamTensor& t : tensors_) {
    if (t.name == name) return t;
  }
  throw std::out_of_range("no parameter tensor named " + name);
}

size_t ParamLayout::num_params() const {
  size_t n = 0;
  for (const ParamTensor& t : tensors_) n += t.count;
  return n;
}

std::vector<ParamSegment> ParamLayout::segments() const {
  std::vector<ParamSegment> segs;
  for (size_t i = 0; i < tensors_.size(); ++i) {
    const ParamTensor& t = tensors_[i];
    const size_t end = i + 1 < tensors_.size() ? tensors_[i + 1].offset : total_;
    segs.push_back(ParamSegment{t.offset, end - t.offset, t.decay});
  }
  return segs;
}

}  // namespace srkit

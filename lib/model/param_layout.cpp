#include "lib/model/param_layout.h"

#include <stdexcept>

namespace srkit {

ParamLayout::ParamLayout(const GPTConfig& c) {
  const int64_t L = c.num_layers, C = c.channels, Vp = c.padded_vocab_size(), T = c.max_seq_len;
  auto add = [&](const char* name, std::vector<int64_t> shape, bool decay, ParamGroup group) {
    ParamTensor t;
    t.name = name;
    t.count = 1;
    for (int64_t d : shape) t.count *= size_t(d);
    t.shape = std::move(shape);
    t.offset = total_;
    t.decay = decay;
    t.group = group;
    total_ += (t.count + kParamAlign - 1) / kParamAlign * kParamAlign;
    tensors_.push_back(std::move(t));
  };
  using G = ParamGroup;
  // Order and names follow GPT-2 / llm.c; per-layer tensors are stacked on a leading L axis.
  add("wte", {Vp, C}, true, G::kEmbeddings);
  add("wpe", {T, C}, true, G::kEmbeddings);
  add("h.ln_1.weight", {L, C}, false, G::kLayerNorm);
  add("h.ln_1.bias", {L, C}, false, G::kBias);
  add("h.attn.c_attn.weight", {L, 3 * C, C}, true, G::kAttention);
  add("h.attn.c_attn.bias", {L, 3 * C}, false, G::kBias);
  add("h.attn.c_proj.weight", {L, C, C}, true, G::kAttention);
  add("h.attn.c_proj.bias", {L, C}, false, G::kBias);
  add("h.ln_2.weight", {L, C}, false, G::kLayerNorm);
  add("h.ln_2.bias", {L, C}, false, G::kBias);
  add("h.mlp.c_fc.weight", {L, 4 * C, C}, true, G::kMlp);
  add("h.mlp.c_fc.bias", {L, 4 * C}, false, G::kBias);
  add("h.mlp.c_proj.weight", {L, C, 4 * C}, true, G::kMlp);
  add("h.mlp.c_proj.bias", {L, C}, false, G::kBias);
  add("ln_f.weight", {C}, false, G::kLayerNorm);
  add("ln_f.bias", {C}, false, G::kBias);
}

const char* param_group_name(ParamGroup group) {
  switch (group) {
    case ParamGroup::kEmbeddings:
      return "embeddings";
    case ParamGroup::kAttention:
      return "attention";
    case ParamGroup::kMlp:
      return "mlp";
    case ParamGroup::kLayerNorm:
      return "layernorm";
    case ParamGroup::kBias:
      return "biases";
  }
  return "?";
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

std::vector<ParamGroupRange> ParamLayout::group_ranges() const {
  const std::vector<ParamSegment> segs = segments();  // segs[i]: tensor i and its padding
  std::vector<ParamGroupRange> ranges;
  for (size_t i = 0; i < tensors_.size(); ++i) {
    const size_t end = segs[i].offset + segs[i].count;
    if (!ranges.empty() && ranges.back().group == tensors_[i].group) {
      ranges.back().end = end;
    } else {
      ranges.push_back(ParamGroupRange{segs[i].offset, end, tensors_[i].group});
    }
  }
  return ranges;
}

}  // namespace srkit

// Typed-by-role views of a parameter-sized flat buffer (the weights, or the
// gradients): one pointer per tensor and layer, resolved from the ParamLayout
// once, so the forward and backward passes never look a tensor up by name (as
// llm.c's ParameterTensors).
#pragma once

#include <vector>

#include "kernels/common/dtype.h"
#include "lib/model/param_layout.h"

namespace srkit {

struct LayerTensors {
  void* ln1_w;
  void* ln1_b;
  void* qkv_w;  // c_attn: [3C, C]
  void* qkv_b;
  void* attproj_w;  // attn c_proj: [C, C]
  void* attproj_b;
  void* ln2_w;
  void* ln2_b;
  void* fc_w;  // mlp c_fc: [4C, C]
  void* fc_b;
  void* fcproj_w;  // mlp c_proj: [C, 4C]
  void* fcproj_b;
};

struct ParamViews {
  void* wte = nullptr;  // [Vp, C], tied with the classifier
  void* wpe = nullptr;  // [max_seq_len, C]
  void* lnf_w = nullptr;
  void* lnf_b = nullptr;
  std::vector<LayerTensors> layers;

  // base: a buffer of layout.total_size() elements of dtype.
  static ParamViews of(const ParamLayout& layout, int num_layers, void* base, DType dtype);
};

}  // namespace srkit

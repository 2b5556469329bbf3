#include "lib/model/param_views.h"

#include <cstddef>

namespace srkit {

ParamViews ParamViews::of(const ParamLayout& layout, int num_layers, void* base, DType dtype) {
  const size_t es = dtype_size(dtype);
  // Tensor `name`, layer l of a stacked tensor (l < 0: not stacked).
  auto at = [&](const char* name, int l = -1) -> void* {
    const ParamTensor& t = layout.get(name);
    const size_t per_layer = l < 0 ? 0 : t.count / size_t(num_layers);
    return static_cast<char*>(base) + (t.offset + size_t(l < 0 ? 0 : l) * per_layer) * es;
  };
  ParamViews v;
  v.wte = at("wte");
  v.wpe = at("wpe");
  v.lnf_w = at("ln_f.weight");
  v.lnf_b = at("ln_f.bias");
  for (int l = 0; l < num_layers; ++l) {
    v.layers.push_back(LayerTensors{
        at("h.ln_1.weight", l), at("h.ln_1.bias", l), at("h.attn.c_attn.weight", l),
        at("h.attn.c_attn.bias", l), at("h.attn.c_proj.weight", l), at("h.attn.c_proj.bias", l),
        at("h.ln_2.weight", l), at("h.ln_2.bias", l), at("h.mlp.c_fc.weight", l),
        at("h.mlp.c_fc.bias", l), at("h.mlp.c_proj.weight", l), at("h.mlp.c_proj.bias", l)});
  }
  return v;
}

}  // namespace srkit

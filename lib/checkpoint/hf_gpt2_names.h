// The one correspondence between srkit's GPT-2 parameters (llm.c's layout,
// lib/model/param_layout.h) and the tensors of a Hugging Face GPT2LMHeadModel
// checkpoint; sr-export and sr-train --init-from both go through it.
//
// - srkit stacks the per-layer tensors on a leading L axis ("h.ln_1.weight",
//   [L, C]); HF names one tensor per layer ("transformer.h.3.ln_1.weight", [C]).
// - The four matrices are nn.Linear-shaped [out, in] in srkit and Conv1D-shaped
//   [in, out] in HF: c_attn [3C, C] <-> [C, 3C], attn.c_proj [C, C],
//   mlp.c_fc [4C, C] <-> [C, 4C], mlp.c_proj [C, 4C] <-> [4C, C]; transposed.
// - wte: srkit pads the vocabulary to Vp rows (zero); HF holds the V real rows.
// - lm_head.weight is wte (tied): HF's GPT-2 files omit it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "lib/model/gpt_config.h"
#include "lib/model/param_layout.h"

namespace srkit {

// The prefix GPT2LMHeadModel puts before its GPT2Model's tensors; files saved
// from a bare GPT2Model (HF's own gpt2 upload) leave it out.
constexpr const char* kHfModelPrefix = "transformer.";
constexpr const char* kHfTiedHead = "lm_head.weight";

struct HfTensor {
  std::string name;            // with the "transformer." prefix
  std::vector<int64_t> shape;  // HF's shape
  std::string param;           // the srkit tensor it lives in (ParamLayout name)
  int layer = -1;              // its slice on the stacked L axis; -1: not stacked
  bool transposed = false;     // HF [in, out] is the transpose of srkit's [out, in]

  size_t count() const;  // elements
};

// Every HF tensor of a model in the order HF writes them: wte, wpe, the layers'
// ln_1, attn.c_attn, attn.c_proj, ln_2, mlp.c_fc, mlp.c_proj (weight, bias
// each), ln_f. Together they cover every parameter of the ParamLayout once.
std::vector<HfTensor> hf_gpt2_tensors(const GPTConfig& config);
// How many that is, without building the list.
uint64_t hf_gpt2_tensor_count(const GPTConfig& config);

// The name without the "transformer." prefix.
std::string hf_bare_name(const HfTensor& t);

// The causal-mask buffers older transformers versions saved with the weights
// ("[transformer.]h.<i>.attn.bias", "...attn.masked_bias"): not parameters,
// skipped on import.
bool is_hf_gpt2_buffer(const std::string& name);

// Copies one HF tensor out of / into a host image of the flat parameter buffer
// (`flat`: layout.total_size() elements of elem_size bytes, 2 or 4), applying
// the slice, the vocabulary rows and the transpose. `hf` is row-major in HF's shape.
void hf_tensor_from_flat(const HfTensor& t, const ParamLayout& layout, const void* flat, void* hf,
                         size_t elem_size);
void hf_tensor_to_flat(const HfTensor& t, const ParamLayout& layout, const void* hf, void* flat,
                       size_t elem_size);

}  // namespace srkit

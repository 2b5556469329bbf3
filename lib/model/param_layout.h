// Where every parameter tensor sits in the one flat parameter buffer (as llm.c),
// so "global element index" in the random-bits contract is a buffer offset.
// Tensors start at multiples of kParamAlign elements: whole cache lines for
// both dtypes and whole 8-element Philox groups, so shards never split a group.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/common/adamw.h"
#include "lib/model/gpt_config.h"

namespace srkit {

constexpr size_t kParamAlign = 64;

// The tensor groups the optimizer telemetry is reported by (step records'
// "groups"): embeddings (wte, wpe), attention matrices (qkv, projection), MLP
// matrices (fc, projection), LayerNorm gains (incl. the final one) and biases.
enum class ParamGroup : uint8_t { kEmbeddings, kAttention, kMlp, kLayerNorm, kBias };
constexpr size_t kParamGroupCount = 5;
// "embeddings", "attention", "mlp", "layernorm", "biases".
const char* param_group_name(ParamGroup group);

// Flat-buffer range [begin, end) whose tensors (with their alignment padding)
// all belong to one group.
struct ParamGroupRange {
  size_t begin, end;
  ParamGroup group;
};

struct ParamTensor {
  std::string name;            // e.g. "wte", "h.qkv.weight" (stacked over layers)
  std::vector<int64_t> shape;  // logical shape
  size_t offset = 0;           // in elements, multiple of kParamAlign
  size_t count = 0;            // product of shape
  bool decay = false;          // matrices and embeddings decay; biases and LayerNorm do not
  ParamGroup group = ParamGroup::kEmbeddings;
};

class ParamLayout {
 public:
  explicit ParamLayout(const GPTConfig& config);

  const std::vector<ParamTensor>& tensors() const { return tensors_; }
  const ParamTensor& get(const std::string& name) const;
  size_t num_params() const;                    // sum of tensor counts (no padding)
  size_t total_size() const { return total_; }  // flat buffer length incl. alignment padding
  // Segments covering [0, total_size()) for the optimizer; padding never decays.
  std::vector<ParamSegment> segments() const;
  // The maximal runs of consecutive tensors of one group, in buffer order,
  // covering [0, total_size()) as segments() does (groups interleave, so a
  // group has several ranges: 15 for GPT-2's layout).
  std::vector<ParamGroupRange> group_ranges() const;

 private:
  std::vector<ParamTensor> tensors_;
  size_t total_ = 0;
};

}  // namespace srkit

// Hugging Face GPT-2 folders (config.json + model.safetensors, what
// transformers' GPT2LMHeadModel.from_pretrained(DIR) loads) written from and
// read into srkit's flat GPT-2 weights. Weights only: optimizer state is not
// part of the format. Names, shapes and transposes: hf_gpt2_names.h; the
// config: hf_gpt2_config.h; docs/interop.md has the whole picture.
#pragma once

#include <string>
#include <vector>

#include "kernels/common/dtype.h"
#include "lib/model/gpt.h"
#include "lib/model/gpt_config.h"

namespace srkit {

// Writes DIR/config.json and DIR/model.safetensors (metadata {"format": "pt"},
// "transformer."-prefixed names, no lm_head.weight since it is tied, no mask
// buffers). `weights` is a host image of the flat parameter buffer
// (ParamLayout(config).total_size() elements of weights_dtype); tensors are
// stored as out_dtype (f32 -> bf16 rounds to nearest even). Creates DIR; the
// folder is replaced atomically (AtomicDirWriter, lib/util/atomic_file.h):
// a reader sees the old export or the new one, never a mix.
void save_hf_gpt2(const std::string& dir, const GPTConfig& config, const void* weights,
                  DType weights_dtype, DType out_dtype);

// Reads DIR/model.safetensors into a host image of the flat parameter buffer of
// `config` in `dtype` (F32, F16 and BF16 tensors converted: exact widening, RN
// narrowing); padded vocabulary rows and alignment padding are zero. Accepts
// names with or without "transformer.", skips the mask buffers, and accepts a
// stored lm_head.weight only if it equals wte. Throws std::runtime_error naming
// the file and the tensor (with the expected name, shape or dtype) otherwise,
// and for a NaN or infinite value (in `dtype`).
std::vector<char> read_hf_gpt2_weights(const std::string& dir, const GPTConfig& config,
                                       DType dtype);

// The header-only check of --init-from, before any memory is spent: DIR's
// model.safetensors holds every tensor of `config` with its shape and a float
// dtype. Throws std::runtime_error naming the file, the tensor and config.json.
void check_hf_gpt2_weights(const std::string& dir, const GPTConfig& config);

// sr-train --init-from: checks that DIR/config.json describes the model's
// shape, then loads DIR's weights into the model in its weight dtype.
void load_hf_gpt2(const std::string& dir, GPT& model);

}  // namespace srkit

"""Logits of a Hugging Face GPT-2 folder computed by transformers, for the
comparison with srkit's forward in tests/test_hf_gpt2_cli.cpp.

usage: python3 hf_logits.py DIR TOKENS OUT
  DIR     a folder written by sr-export --hf (config.json + model.safetensors)
  TOKENS  comma-separated token ids: one sequence
  OUT     written as little-endian float32 logits, [len(TOKENS), vocab_size]

Fails (exit 1) unless from_pretrained loads the folder with no missing and no
unexpected weights and the head is tied to wte.
"""
import struct
import sys

import torch
from transformers import GPT2LMHeadModel


def main():
    folder, tokens, out = sys.argv[1:4]
    model, info = GPT2LMHeadModel.from_pretrained(
        folder, torch_dtype=torch.float32, output_loading_info=True)
    problems = {k: v for k, v in info.items() if v}  # missing, unexpected, mismatched, errors
    if problems:
        sys.exit(f"{folder}: from_pretrained reported {problems}")
    if model.lm_head.weight.data_ptr() != model.transformer.wte.weight.data_ptr():
        sys.exit(f"{folder}: lm_head.weight is not tied to transformer.wte.weight")
    model.eval()
    ids = torch.tensor([[int(t) for t in tokens.split(",")]], dtype=torch.long)
    with torch.no_grad():
        logits = model(ids).logits[0].to(torch.float32).contiguous().flatten().tolist()
    with open(out, "wb") as f:
        f.write(struct.pack(f"<{len(logits)}f", *logits))


if __name__ == "__main__":
    main()

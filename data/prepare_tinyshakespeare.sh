#!/usr/bin/env bash
# Tokenizes Tiny Shakespeare (byte-level, vocab 256) into llm.c .bin shards:
#   data/tinyshakespeare/tinyshakespeare_train_000000.bin  (first 90%)
#   data/tinyshakespeare/tinyshakespeare_val_000000.bin    (last 10%)
# Input: ../shared/data/tinyshakespeare.txt next to the repository, or $1.
# The output folder is generated data: keep it out of git (see data/README.md).
# Needs a build: sr-prep is looked up in $SRKIT_BUILD_DIR (default build)/bin.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
input="${1:-$repo/../shared/data/tinyshakespeare.txt}"
prep="$repo/${SRKIT_BUILD_DIR:-build}/bin/sr-prep"
out="$repo/data/tinyshakespeare"

if [[ ! -f "$input" ]]; then
  echo "prepare_tinyshakespeare: $input not found." >&2
  echo "  Put the text there (or pass its path as the first argument); it is the" >&2
  echo "  40,000-line Tiny Shakespeare corpus (input.txt of karpathy/char-rnn)." >&2
  exit 1
fi
if [[ ! -x "$prep" ]]; then
  echo "prepare_tinyshakespeare: $prep not found; build first (make build)" >&2
  echo "  or point SRKIT_BUILD_DIR at your build directory." >&2
  exit 1
fi

"$prep" "$input" --out "$out" --name tinyshakespeare --val-fraction 0.1
echo "train shards: '$out/tinyshakespeare_train_*.bin'  val shards: '$out/tinyshakespeare_val_*.bin'"

#!/usr/bin/env bash
# Builds llm.c's CUDA trainer (train_gpt2cu) from its unmodified source with its
# own Makefile, for the GPU bundle (bench/gpu/README.md, "llm.c beside srkit"):
#   bash bench/gpu/llmc/build_llmc.sh SRC_DIR OUT_DIR [SM]     # SM default 90
# OUT_DIR gets train_gpt2cu, llm.c's LICENSE and SOURCE.md, and BUILD.txt (how
# it was built). On failure it exits 1 and OUT_DIR/BUILD-FAILED.txt says why.
# llm.c is a comparator, not part of srkit: its source is copied to a temporary
# folder and built there, never into srkit's tree.
set -uo pipefail
src="${1:?usage: build_llmc.sh SRC_DIR OUT_DIR [SM]}"
out="${2:?usage: build_llmc.sh SRC_DIR OUT_DIR [SM]}"
sm="${3:-90}"
here="$(cd "$(dirname "$0")" && pwd)"
mkdir -p "$out"
rm -f "$out/BUILD-FAILED.txt" "$out/train_gpt2cu" "$out/BUILD.txt"
failed() {
  echo "$*" >"$out/BUILD-FAILED.txt"
  echo "build_llmc: $*" >&2
  exit 1
}
[ -f "$src/train_gpt2.cu" ] && [ -f "$src/Makefile" ] ||
  failed "$src holds no llm.c source (train_gpt2.cu and Makefile expected)"
command -v nvcc >/dev/null 2>&1 || failed "nvcc not found (put the CUDA toolkit's bin on PATH)"
work="$(mktemp -d "${TMPDIR:-/tmp}/srkit-llmc.XXXXXX")" || failed "cannot create a temporary folder"
trap 'rm -rf "$work"' EXIT
cp -r "$src" "$work/src"
# Its Makefile links -lnvidia-ml (NVML, used only by its -lg GPU-utilisation
# log, which stays off). The build machine has no NVIDIA driver, so an empty
# stand-in satisfies the link; the linker drops it as unneeded, and a node that
# ran -lg would load the driver's own libnvidia-ml.so.1.
mkdir -p "$work/nvml"
echo 'void srkit_nvml_link_stand_in(void) {}' >"$work/nvml/stand_in.c"
cc -shared -fPIC -Wl,-soname,libnvidia-ml.so.1 -o "$work/nvml/libnvidia-ml.so" \
  "$work/nvml/stand_in.c" || failed "cannot build the NVML link stand-in (cc)"
# One GPU architecture, no NCCL, no MPI, no cuDNN: one process on one GPU, and
# what its SOURCE.md names as the build that needs only nvcc and cuBLAS(Lt).
flags=(NO_MULTI_GPU=1 NO_USE_MPI=1 USE_CUDNN=0 "GPU_COMPUTE_CAPABILITY=$sm"
  "PFLAGS=-DENABLE_BF16 -include $here/cuda13_compat.h"
  "NVCC_LDFLAGS=-lcublas -lcublasLt -L$work/nvml -lnvidia-ml")
if ! make -C "$work/src" train_gpt2cu "${flags[@]}" >"$work/build.log" 2>&1; then
  failed "make train_gpt2cu failed: $(grep -m1 -E 'error|Error' "$work/build.log" | cut -c1-200)"
fi
install -m 755 "$work/src/train_gpt2cu" "$out/"
# MIT: its copies travel with its license.
install -m 644 "$src/LICENSE" "$out/"
[ -f "$src/SOURCE.md" ] && install -m 644 "$src/SOURCE.md" "$out/"
{
  echo "llm.c train_gpt2cu for sm_$sm, built $(date -u +%Y-%m-%dT%H:%MZ) from $src"
  echo "nvcc: $(nvcc --version | tail -1)"
  echo "make train_gpt2cu ${flags[*]}"
} >"$out/BUILD.txt"

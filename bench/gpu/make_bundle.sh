#!/usr/bin/env bash
# make gpu-bundle: build srkit's GPU checks on this (build) machine and collect
# them, with the non-CUDA shared libraries they need, into gpu-bundle/ (at most
# 64 MiB), plus run.sh, which runs them on a GPU node that has the NVIDIA driver
# and a CUDA 13 runtime and cuBLASLt but none of srkit's build dependencies.
# See bench/gpu/README.md.
#   bash bench/gpu/make_bundle.sh [OUT_DIR] [CUDA_ARCHS]   # defaults: gpu-bundle "90;80"
set -euo pipefail
cd "$(dirname "$0")/../.."
out="${1:-gpu-bundle}"
archs="${2:-90;80}"
build="${BUNDLE_BUILD_DIR:-build-bundle}"
limit_mib=64
export PATH="/usr/local/cuda/bin:$PATH"

launcher=()
if command -v ccache >/dev/null 2>&1; then
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
fi
# No MPI: a GPU node has no mpirun to start ranks (NCCL is bootstrapped
# through MPI), and OpenMPI's libraries would not fit the bundle.
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DSRKIT_CUDA=ON -DSRKIT_MPI=OFF \
  -DSRKIT_GPU_BUNDLE=ON "-DCMAKE_CUDA_ARCHITECTURES=$archs" "${launcher[@]}" >/dev/null
cmake --build "$build" -j "$(nproc)" --target srkit_gpu_bundle_tests sr-bench sr-prep bench_cuda_kernels

rm -rf "$out"
mkdir -p "$out/bin" "$out/lib"
bins=(srkit_gpu_bundle_tests sr-bench bench_cuda_kernels)
for b in "${bins[@]}"; do
  cp "$build/bin/$b" "$out/bin/"
  strip --strip-unneeded "$out/bin/$b"
done
# The shared libraries the binaries need, except what the GPU node brings: the
# CUDA runtime, cuBLAS(Lt) and NCCL (far too large to carry), the driver, and
# the C library and loader.
skip='^(libcuda|libcudart|libcublas|libcublasLt|libnccl|libc|libm|libdl|libpthread|librt|ld-linux.*)\.so'
for b in "${bins[@]}"; do
  ldd "$build/bin/$b" | awk '/=> \// {print $1, $3}'
done | sort -u | while read -r name path; do
  if [[ "$name" =~ $skip ]]; then continue; fi
  cp -L "$path" "$out/lib/$name"
done
strip --strip-unneeded "$out"/lib/*.so* 2>/dev/null || true
# llm.c beside srkit (bundle_run.sh step 5b): its trainer, built here from its
# unmodified source (../shared/third_party/llm.c, or BUNDLE_LLMC) for the
# bundle's first architecture; a failed build leaves BUILD-FAILED.txt, which the
# summary quotes, and the rest of the bundle is unaffected.
llmc_src="${BUNDLE_LLMC:-../shared/third_party/llm.c}"
if [ -d "$llmc_src" ]; then
  llmc_sm="${archs%%;*}"
  if bash bench/gpu/llmc/build_llmc.sh "$llmc_src" "$out/llmc" "$llmc_sm"; then
    ldd "$out/llmc/train_gpt2cu" | awk '/=> \// {print $1, $3}' | while read -r name path; do
      if [[ "$name" =~ $skip ]] || [ -e "$out/lib/$name" ]; then continue; fi
      cp -L "$path" "$out/lib/$name"
    done
  fi
fi
# Programs and libraries travel as one gzip'ed tar (about a third of their
# size; gzip is on every node); run.sh unpacks it into a temporary folder.
payload=(bin lib)
[ -x "$out/llmc/train_gpt2cu" ] && payload+=(llmc)
tar -C "$out" -czf "$out/payload.tar.gz" "${payload[@]}"
du -sh "$out"/bin/* "$out"/lib/* | sort -h | tail -6
rm -rf "$out/bin" "$out/lib"
[ -x "$out/llmc/train_gpt2cu" ] && rm -rf "$out/llmc"
# The learning-rate grid's data and the cells finished in earlier sessions
# (bundle_run.sh step 7); the data is a checkout's ../shared/data when present.
data="${BUNDLE_DATA:-../shared/data/tinyshakespeare.txt}"
if [ -f "$data" ]; then
  mkdir -p "$out/data" && cp "$data" "$out/data/tinyshakespeare.txt"
  # The same text as llm.c .bin byte-token shards, for llm.c (step 5b).
  "$build/bin/sr-prep" --out "$out/data/llmc" --name tinyshakespeare "$data" >/dev/null
  rm -f "$out/data/llmc/"*_tokenizer_info.json
fi
if [ -d docs/experiments/sweep-gpt2-124m-lr/cells ]; then
  mkdir -p "$out/carry/sweep-gpt2-124m-lr"
  cp -r docs/experiments/sweep-gpt2-124m-lr/cells "$out/carry/sweep-gpt2-124m-lr/"
fi
cp bench/gpu/bundle_run.sh "$out/run.sh"
cp bench/gpu/bundle_report.py "$out/report.py"
chmod +x "$out/run.sh"
cat >"$out/BUILD.txt" <<EOF
srkit GPU bundle, built $(date -u +%Y-%m-%dT%H:%MZ) from $(git rev-parse --short HEAD 2>/dev/null || echo unknown)
CUDA architectures: $archs; nvcc: $(nvcc --version | tail -1)
Run on a GPU node: bash run.sh [RESULTS_DIR]   (bench/gpu/README.md)
EOF

size_kib=$(du -sk "$out" | cut -f1)
echo "gpu-bundle: $out, $((size_kib / 1024)) MiB (limit $limit_mib MiB)"
if [ "$size_kib" -gt $((limit_mib * 1024)) ]; then
  echo "gpu-bundle: $out is larger than $limit_mib MiB" >&2
  exit 1
fi

#!/usr/bin/env bash
# One call on a GPU machine: build with CUDA for the local architecture family,
# run the GPU tests (CPU vs CUDA bit-exactness of casts and AdamW), run the CUDA
# kernel benchmark, and print a short table last. Usage (from the repo root):
#   bash bench/gpu/run_gpu_checks.sh [ARCH]     # ARCH default 90 (H100/H200)
set -uo pipefail
cd "$(dirname "$0")/../.."
arch="${1:-90}"
out="${OUT:-build-gpu/out}"
export PATH="/usr/local/cuda/bin:$PATH"
mkdir -p "$out"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$out/gpu.txt"

cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DSRKIT_CUDA=ON \
  -DCMAKE_CUDA_ARCHITECTURES="$arch" -DSRKIT_BUILD_BENCH=ON >"$out/configure.log" 2>&1 &&
  cmake --build build-gpu -j"$(nproc)" >"$out/build.log" 2>&1
build_rc=$?
if [ $build_rc -ne 0 ]; then tail -30 "$out/build.log"; echo "| build | FAILED |"; exit 1; fi

(cd build-gpu && ctest -L gpu --output-on-failure --timeout 300) >"$out/gpu-tests.log" 2>&1
test_rc=$?
./build-gpu/bin/bench_cuda_kernels --benchmark_min_time=0.2 \
  --benchmark_out="$out/bench_cuda_kernels.json" --benchmark_out_format=json \
  >"$out/bench.log" 2>&1
bench_rc=$?

echo
echo "| check | result |"
echo "|---|---|"
echo "| device | $(head -1 "$out/gpu.txt") |"
echo "| GPU tests | $(grep -E 'tests passed|tests failed' "$out/gpu-tests.log" | tail -1) (rc $test_rc) |"
echo "| skipped | $(grep -c 'Skipped' "$out/gpu-tests.log") |"
echo "| kernel bench | rc $bench_rc, $(grep -c '"name"' "$out/bench_cuda_kernels.json" 2>/dev/null || echo 0) entries |"
grep -E '^(BM_|[A-Za-z]).*bytes_per_second' "$out/bench.log" | awk '{printf "| %s | %s %s |\n", $1, $(NF-1), $NF}' | head -40

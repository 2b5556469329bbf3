#!/usr/bin/env bash
# run.sh of the srkit GPU bundle (made by `make gpu-bundle`, bench/gpu/README.md).
# On a GPU node with the NVIDIA driver and a CUDA 13 runtime + cuBLASLt (from
# the toolkit or the pip NVIDIA packages), and nothing else of srkit's:
#   bash run.sh [RESULTS_DIR]          # default: ./results
# It records an inventory, runs every GPU test (the conformance suite's cuda
# instance and the GPU training tests: a skipped test is a failure here), runs
# compute-sanitizer memcheck on a subset, the kernel and training benchmarks,
# the learning-rate grid's next cells, and writes at most 10 result files,
# summary.md (a short table) last. It stops
# at once, naming why, where there is no GPU or a library is missing.
set -uo pipefail
bundle="$(cd "$(dirname "$0")" && pwd)"
out="$(mkdir -p "${1:-results}" && cd "${1:-results}" && pwd)"
start=$(date +%s)
summary="$out/summary.md"
rows=()
# summary.md is rewritten after every row, so a call cut off by its time limit
# still brings back what was measured before.
write_summary_file() {
  {
    echo "# srkit GPU bundle: $(date -u +%Y-%m-%dT%H:%MZ), $(($(date +%s) - start)) s"
    echo
    echo "| check | result |"
    echo "|---|---|"
    printf '%s\n' "${rows[@]}"
  } >"$summary"
}
row() {
  rows+=("| $1 | $2 |")
  write_summary_file
}
write_summary() {
  write_summary_file
  cat "$summary"
}
trap 'row "stopped" "interrupted (signal) after $(($(date +%s) - start)) s"; write_summary; exit 124' TERM INT
fail() {
  echo "srkit gpu bundle: $*" >&2
  row "stopped" "$*"
  write_summary
  exit 2
}

# ---- 1. the device and the libraries --------------------------------------------
inventory="$out/inventory.txt"
{
  echo "host: $(uname -n) $(uname -r)"
  echo "cpu: $(grep -m1 'model name' /proc/cpuinfo 2>/dev/null | cut -d: -f2- | sed 's/^ //')"
  cat "$bundle/BUILD.txt" 2>/dev/null
} >"$inventory"
if ! command -v nvidia-smi >/dev/null 2>&1; then
  fail "no GPU: nvidia-smi not found (no NVIDIA driver on this machine)"
fi
gpus="$(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>&1)"
if [ $? -ne 0 ] || [ -z "$gpus" ]; then
  fail "no GPU: nvidia-smi lists no device ($(echo "$gpus" | head -1))"
fi
echo "gpus: $gpus" >>"$inventory"

# The programs and their libraries, unpacked where they can run.
[ -f "$bundle/payload.tar.gz" ] || fail "payload.tar.gz missing next to run.sh (make gpu-bundle makes it)"
here="$(mktemp -d "${TMPDIR:-/tmp}/srkit-bundle.XXXXXX")" || fail "cannot create a temporary folder"
trap 'rm -rf "$here"' EXIT
tar -xzf "$bundle/payload.tar.gz" -C "$here" || fail "cannot unpack payload.tar.gz into $here"

# Directories that may hold the CUDA 13 runtime, cuBLASLt and NCCL: the
# toolkit, the system, and the pip NVIDIA packages of any python3 present.
dirs=()
for d in ${CUDA_HOME:+$CUDA_HOME/lib64} /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib \
  /usr/local/cuda-13*/lib64 /usr/lib/x86_64-linux-gnu /usr/lib64; do
  [ -d "$d" ] && dirs+=("$d")
done
if command -v python3 >/dev/null 2>&1; then
  while IFS= read -r d; do [ -d "$d" ] && dirs+=("$d"); done < <(python3 - <<'EOF' 2>/dev/null
import glob, site, sys
roots = site.getsitepackages() + [site.getusersitepackages()] + sys.path
for r in roots:
    for d in sorted(glob.glob(r + "/nvidia/*/lib")) + sorted(glob.glob(r + "/nvidia/cu*/lib")):
        print(d)
EOF
)
fi
libpath="$here/lib"
for lib in libcudart.so.13 libcublasLt.so.13 libcublas.so.13 libnccl.so.2; do
  found=""
  for d in "${dirs[@]}"; do
    if [ -e "$d/$lib" ]; then found="$d"; break; fi
  done
  [ -n "$found" ] || fail "$lib not found (looked in: ${dirs[*]}); set CUDA_HOME or install the CUDA 13 toolkit or the pip NVIDIA packages"
  echo "$lib: $found" >>"$inventory"
  case ":$libpath:" in *":$found:"*) ;; *) libpath="$libpath:$found" ;; esac
done
export LD_LIBRARY_PATH="$libpath${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
for b in "$here"/bin/*; do
  missing="$(ldd "$b" 2>&1 | grep 'not found')"
  [ -z "$missing" ] || fail "$(basename "$b") cannot load: $(echo "$missing" | head -1 | xargs)"
done
row "device" "$(echo "$gpus" | head -1)"

# ---- 2. every GPU test: a skip is a failure -------------------------------------
tests_log="$out/gpu-tests.log"
timeout 300 "$here/bin/srkit_gpu_bundle_tests" --gtest_color=no >"$tests_log.full" 2>&1
tests_rc=$?
passed=$(grep -c '^\[       OK \]' "$tests_log.full")
# One line per test as it ends ("... (12 ms)"), not the lists at the end of the run.
failed=$(grep -cE '^\[  FAILED  \] .* \([0-9]+ ms\)$' "$tests_log.full")
skipped=$(grep -cE '^\[  SKIPPED \] .* \([0-9]+ ms\)$' "$tests_log.full")
{
  grep -E '^\[  (FAILED|SKIPPED) \]' "$tests_log.full" | head -60
  echo "..."
  tail -150 "$tests_log.full"
} >"$tests_log"
# How often the approximate first tries are kept on this GPU
# (tests/gpu/test_approx_tries_gpu.cu prints them; the emulation's are the floor).
tries=$(grep -E '^\[ (GELU|softmax) try \] (kept|margin )' "$tests_log.full" | grep -v 'margin 0 + 0' |
  sed -E 's/^\[ ([a-zA-Z]+) try \] /\1 /; s/margin [^:]*: //' | paste -sd '/' - | sed 's|/| / |g')
rm -f "$tests_log.full"
tests_ok=$([ $tests_rc -eq 0 ] && [ "$skipped" -eq 0 ] && echo yes || echo no)
row "GPU tests (conformance suite on cuda, training on cuda vs cpu)" \
  "$passed passed, $failed failed, $skipped skipped (rc $tests_rc): $([ "$tests_ok" = yes ] && echo PASS || echo FAIL)"
row "approximate first tries kept (GELU, attention P/dS)" "${tries:-not printed}"

# ---- 3. compute-sanitizer memcheck on a subset ------------------------------------
sanitizer_log="$out/memcheck.log"
if command -v compute-sanitizer >/dev/null 2>&1; then
  timeout 150 compute-sanitizer --tool memcheck --error-exitcode 3 \
    "$here/bin/srkit_gpu_bundle_tests" --gtest_color=no \
    --gtest_filter='cuda/BackendOpsDtype.*:cuda/BackendOps.*:AdamWGpu*:CastGpu*' >"$sanitizer_log" 2>&1
  san_rc=$?
  errors=$(grep -m1 -E 'ERROR SUMMARY' "$sanitizer_log" || echo "no summary")
  row "compute-sanitizer memcheck (ops, AdamW, casts)" "rc $san_rc, $errors"
  # racecheck: shared-memory hazards of the kernels that tile through shared
  # memory (the flash attention and the tensor-core fragments); appended to the
  # same log. T = 1000 is left out: racecheck runs it for minutes.
  {
    echo
    echo "==== racecheck ===="
  } >>"$sanitizer_log"
  timeout 150 compute-sanitizer --tool racecheck --error-exitcode 3 \
    "$here/bin/srkit_gpu_bundle_tests" --gtest_color=no \
    --gtest_filter='Shapes/FlashAttentionShapes.*:FlashAttentionGpu.*:MmaFragmentGpu.*:-*T1000*' \
    >>"$sanitizer_log" 2>&1
  race_rc=$?
  race=$(grep -E 'RACECHECK SUMMARY|ERROR SUMMARY' "$sanitizer_log" | tail -1)
  row "compute-sanitizer racecheck (flash attention, mma fragments)" "rc $race_rc, ${race:-no summary}"
else
  echo "compute-sanitizer not found" >"$sanitizer_log"
  row "compute-sanitizer memcheck" "not run: compute-sanitizer not found"
fi

# ---- 4. kernel benchmark: casts and SR-AdamW against a same-run D2D copy ---------
kernels_json="$out/kernels.json"
timeout 90 "$here/bin/bench_cuda_kernels" --benchmark_min_time=0.1 \
  --benchmark_out="$kernels_json" --benchmark_out_format=json >/dev/null 2>&1
row "kernel benchmark" "rc $?, $(grep -c '"name"' "$kernels_json" 2>/dev/null || echo 0) entries (kernels.json)"

# ---- 5. training benchmark and the memory model ----------------------------------
train_md="$out/train.md"
train_json="$out/train.json"
strategies="fp32,amp,mixed,bf16,bf16-sr,bf16-kahan,bf16-sr:g=f32"
timeout 240 "$here/bin/sr-bench" train --device cuda --models gpt2-124m,gpt2-350m \
  --strategies "$strategies" --batches 16 --seq-len 1024 --warmup 2 --steps 4 --phases \
  --json "$train_json" >"$train_md" 2>&1
train_rc=$?
timeout 30 "$here/bin/sr-bench" memory --device cuda --models gpt2-124m,gpt2-350m \
  --strategies "$strategies" --batches 16 --seq-len 1024 >>"$train_md" 2>&1
row "training benchmark (gpt2-124m, gpt2-350m; B=16, T=1024)" "rc $train_rc (train.md, train.json)"
if [ -s "$train_json" ] && command -v python3 >/dev/null 2>&1; then
  while IFS= read -r line; do rows+=("$line"); done < <(python3 "$bundle/report.py" train "$train_json")
  write_summary_file
fi

# ---- 5b. llm.c beside srkit: the same model, shape and data, in the same run ------
# llm.c (third-party, MIT, unmodified; built for the bundle by
# bench/gpu/llmc/build_llmc.sh) trains gpt2-124m from scratch (-e d12) on the
# bundle's sr-prep byte-token shards with its pure-bf16 mode (-w 0) and with fp32
# master weights (-w 1), no recomputation, TF32 off; srkit's bf16-sr and mixed run
# at the same shape just before it. train.md gets the figures, summary.md one line.
llmc_tokens=$((16 * 1024))
if [ -x "$here/llmc/train_gpt2cu" ] && compgen -G "$bundle/data/llmc/*_train_*.bin" >/dev/null; then
  cap="$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d ' .')"
  built_for="$(sed -n 's/^llm.c train_gpt2cu for sm_\([0-9]*\).*/\1/p' "$here/llmc/BUILD.txt" 2>/dev/null)"
  if [ -n "$built_for" ] && [ -n "$cap" ] && [ "$cap" != "$built_for" ]; then
    row "srkit / llm.c tok/s" "not run: llm.c was built for sm_$built_for, this device is sm_$cap"
  else
    pair_json="$here/srkit-vs-llmc.json"
    timeout 90 "$here/bin/sr-bench" train --device cuda --models gpt2-124m --strategies bf16-sr,mixed \
      --batches 16 --seq-len 1024 --warmup 3 --steps 10 --json "$pair_json" >"$here/srkit-vs-llmc.md" 2>&1
    for w in 0 1; do
      (cd "$here/llmc" && timeout 90 ./train_gpt2cu -e d12 -b 16 -t 1024 -x 30 -w "$w" -r 0 -f 0 \
        -v 0 -s 0 -h 0 -i "$bundle/data/llmc/*_train_*.bin" -j "$bundle/data/llmc/*_val_*.bin") \
        >"$here/llmc-w$w.log" 2>&1
      echo "srkit bundle: train_gpt2cu -w $w exited with $?" >>"$here/llmc-w$w.log"
    done
    if command -v python3 >/dev/null 2>&1; then
      rows+=("$(python3 "$bundle/report.py" llmc "$pair_json" "$here/llmc-w0.log" "$here/llmc-w1.log" \
        "$llmc_tokens" --markdown "$train_md")")
      write_summary_file
    else
      row "srkit / llm.c tok/s" "not compared: python3 not found (the logs are in train.md)"
    fi
    {
      echo
      echo "## srkit's side of the pairing (sr-bench train, gpt2-124m, B=16, T=1024)"
      echo
      cat "$here/srkit-vs-llmc.md"
      for w in 0 1; do
        echo
        echo "## llm.c -w $w: the last of its step lines"
        echo
        grep -E '^step|exited|rror' "$here/llmc-w$w.log" | tail -12
      done
    } >>"$train_md"
  fi
elif [ -f "$bundle/llmc/BUILD-FAILED.txt" ]; then
  row "srkit / llm.c tok/s" "not run: llm.c did not build on the build machine: $(head -1 "$bundle/llmc/BUILD-FAILED.txt")"
else
  row "srkit / llm.c tok/s" "not run: the bundle carries no llm.c (make gpu-bundle builds it from ../shared/third_party/llm.c or BUNDLE_LLMC) or no data"
fi

# ---- 5c. throughput at equal memory (docs/experiments.md) ---------------------------
# Each strategy's fastest micro-batch x accumulation x recomputation within the
# device's memory, at the same optimizer step (8 sequences of T = 2048), confirmed
# by running it: GPT-Neo 1.3B and 2.7B, and 6.7B where it fits one device.
budget_jsons=()
for model in neo-1.3b neo-2.7b neo-6.7b; do
  bj="$here/budget-$model.json"
  { echo; echo "## Equal memory: $model, T=2048, the device's memory"; echo; } >>"$train_md"
  timeout 100 "$here/bin/sr-bench" train --device cuda --models "$model" --seq-len 2048 \
    --strategies fp32,amp,mixed,bf16-sr,bf16-kahan --memory-budget device --tokens-per-step 16384 \
    --warmup 1 --steps 2 --json "$bj" >>"$train_md" 2>&1
  brc=$?
  if [ -s "$bj" ]; then
    budget_jsons+=("$bj")
  else
    row "equal memory: $model, T=2048" "no result (rc $brc; train.md)"
  fi
done
if [ ${#budget_jsons[@]} -gt 0 ] && command -v python3 >/dev/null 2>&1; then
  while IFS= read -r line; do rows+=("$line"); done < <(python3 "$bundle/report.py" budget "${budget_jsons[@]}")
  write_summary_file
fi

# ---- 6. where a training step's device time goes, kernel by kernel ---------------
# Nsight Compute times every kernel of one warm-up and one timed gpt2-124m
# bf16-sr step (B=16, T=1024), one pass each, clocks and caches left as they
# are; profile.md sums them by kernel name (the CSV itself when python3 is absent).
profile_md="$out/profile.md"
if command -v ncu >/dev/null 2>&1; then
  timeout 180 ncu --metrics gpu__time_duration.sum --clock-control none --cache-control none \
    --csv --page raw --print-units base "$here/bin/sr-bench" train --device cuda \
    --models gpt2-124m --strategies bf16-sr --batches 16 --seq-len 1024 --warmup 1 --steps 1 \
    >"$out/profile.csv" 2>"$out/profile.err"
  prof_rc=$?
  if command -v python3 >/dev/null 2>&1 &&
    python3 - "$out/profile.csv" >"$profile_md" 2>>"$out/profile.err" <<'EOF'
import csv, sys
rows = [r for r in csv.reader(open(sys.argv[1])) if r]
head = next(i for i, r in enumerate(rows) if "Kernel Name" in r and "gpu__time_duration.sum" in r)
names = rows[head]
k, t = names.index("Kernel Name"), names.index("gpu__time_duration.sum")
scale = {"nsecond": 1e-9, "ns": 1e-9, "usecond": 1e-6, "us": 1e-6, "msecond": 1e-3, "ms": 1e-3,
         "second": 1.0, "s": 1.0}
unit = scale.get(rows[head + 1][t]) if head + 1 < len(rows) else None
data = rows[head + (2 if unit else 1):]
unit = unit or 1e-9
by = {}
launches = 0
for r in data:
    try:
        sec = float(r[t].replace(",", "")) * unit
    except (ValueError, IndexError):
        continue
    launches += 1
    n, s = by.get(r[k], (0, 0.0))
    by[r[k]] = (n + 1, s + sec)
total = sum(s for _, s in by.values())
print(f"# Device time by kernel: gpt2-124m bf16-sr, B=16, T=1024, 2 steps ({launches} launches)")
print()
print(f"Total kernel time {1e3 * total:.1f} ms (ncu, one pass per kernel, clocks and caches as they are).")
print()
print("| kernel | launches | ms | share |")
print("|---|---:|---:|---:|")
for name, (n, s) in sorted(by.items(), key=lambda x: -x[1][1])[:40]:
    short = name if len(name) <= 90 else name[:87] + "..."
    print(f"| `{short}` | {n} | {1e3 * s:.3f} | {100 * s / max(total, 1e-30):.1f}% |")
EOF
  then
    rm -f "$out/profile.csv"
  else
    mv "$out/profile.csv" "$profile_md"
  fi
  cat "$out/profile.err" >>"$profile_md"
  rm -f "$out/profile.err"
  row "kernel profile (ncu, gpt2-124m bf16-sr step)" "rc $prof_rc (profile.md)"
else
  row "kernel profile" "not run: ncu not found"
fi

# ---- 7. the learning-rate grid, carried across sessions (docs/experiments.md) -----
# gpt2-124m, 1000 steps per cell, 4 strategies x 5 learning rates x 3 seeds: more
# than one session's device time, so each session adds cells for what is left of
# BUNDLE_SECONDS (default 540: the whole bundle within one 10-minute device
# call), at most SWEEP_SECONDS (default 150), and stops (a stopped sweep keeps
# its finished cells); the cells committed under docs/experiments/sweep-gpt2-124m-lr
# (carried in the bundle) count as done. The new cells come back as
# sweep-cells.tar.gz, to unpack into that folder and commit (bench/gpu/README.md).
sweep_dir="$here/sweep-gpt2-124m-lr"
sweep_seconds=$((${BUNDLE_SECONDS:-540} - ($(date +%s) - start) - 20))
[ "$sweep_seconds" -gt "${SWEEP_SECONDS:-150}" ] && sweep_seconds="${SWEEP_SECONDS:-150}"
if [ "$sweep_seconds" -lt 30 ]; then
  row "learning-rate grid" "not run: ${sweep_seconds} s left of BUNDLE_SECONDS=${BUNDLE_SECONDS:-540}"
elif [ -f "$bundle/data/tinyshakespeare.txt" ]; then
  carry=()
  [ -d "$bundle/carry/sweep-gpt2-124m-lr/cells" ] && carry=(--carry "$bundle/carry/sweep-gpt2-124m-lr")
  timeout -s TERM "$sweep_seconds" "$here/bin/sr-bench" sweep --device cuda --model gpt2-124m \
    --data "$bundle/data/tinyshakespeare.txt" --batch 16 --seq-len 256 --steps 1000 --warmup 50 \
    --schedule cosine --eval-batches 8 --curve-points 6 --lrs 3e-4,6e-4,1e-3,2e-3,3e-3 \
    --seeds 1,2,3 --strategies mixed,bf16,bf16-sr,bf16-kahan --jobs 4 --threads 16 \
    "${carry[@]}" --out "$sweep_dir" >"$out/sweep.md" 2>"$out/sweep.err"
  sweep_rc=$?
  cells_done=$(find "$sweep_dir/cells" -name result.json 2>/dev/null | wc -l)
  cells_new=$(find "$sweep_dir/cells" -name result.json -exec grep -L '"carried_from": "[^"]' {} + 2>/dev/null | wc -l)
  (cd "$sweep_dir" && find cells -name result.json -print0 2>/dev/null |
    tar --null -T - -czf "$out/sweep-cells.tar.gz") 2>>"$out/sweep.err"
  tail -5 "$out/sweep.err" >>"$out/sweep.md"
  rm -f "$out/sweep.err"
  row "learning-rate grid (gpt2-124m, 1000 steps, 60 cells)" \
    "rc $sweep_rc, $cells_done of 60 cells done, $cells_new run in this session (sweep-cells.tar.gz)"
else
  row "learning-rate grid" "not run: data/tinyshakespeare.txt not in the bundle"
fi

write_summary
[ "$tests_ok" = yes ] && [ $train_rc -eq 0 ]

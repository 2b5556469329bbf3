#!/usr/bin/env python3
"""Rows of the GPU bundle's summary.md, from the files its steps write
(bench/gpu/bundle_run.sh; bench/gpu/README.md). The bundle carries this file
as report.py; python3 is on the GPU node, and without it the rows are left out.

  report.py train TRAIN_JSON
      one row per cell of `sr-bench train --json`
  report.py llmc SRKIT_JSON W0_LOG W1_LOG TOKENS_PER_STEP [--markdown FILE]
      srkit bf16-sr against llm.c -w 0 and srkit mixed against llm.c -w 1:
      one row, and (appended to FILE) a section with every figure
  report.py budget BUDGET_JSON...
      one row per model of `sr-bench train --memory-budget --json`
"""
import json
import re
import statistics
import sys

# llm.c's step line (train_gpt2.cu): "step    7/30 | loss ... | 35.12 ms | ... tok/s".
LLMC_STEP = re.compile(r"^step\s+(\d+)/(\d+) \|.*\| ([0-9.]+) ms \|")
# Its first steps include cuBLAS start-up and allocation; the median of the
# rest is its step time.
LLMC_SKIP_STEPS = 5


def fmt_ratio(x):
    return f"{x:.2f}x" if x is not None and x >= 0 else "-"


def train_rows(path):
    cells = json.load(open(path)).get("cells", [])
    rows = []
    for c in cells:
        if c.get("status") != "ok":
            rows.append(f"| {c['model']} {c['strategy']} | {c.get('status')}: "
                        f"{c.get('message', '')[:80]} |")
            continue
        peak = c["peak_bytes"]["total"] / 2**30
        vs = c.get("speedup_vs_mixed")
        mem = c.get("memory_vs_mixed")
        rows.append(f"| {c['model']} {c['strategy']} | {c['ms_per_step']['median']:.1f} ms/step, "
                    f"{c['tokens_per_s']:.0f} tok/s, MFU {100 * c['mfu']:.1f}%, peak {peak:.2f} GiB"
                    + (f"; vs mixed: {vs:.2f}x speed, {mem:.2f}x memory" if vs else "") + " |")
    return rows


def llmc_rate(log_path, tokens_per_step):
    """(tok/s, median ms, steps timed) of one llm.c log, or (None, why, 0)."""
    try:
        lines = open(log_path, errors="replace").read().splitlines()
    except OSError as e:
        return None, f"no log ({e.strerror})", 0
    ms = [float(m.group(3)) for m in map(LLMC_STEP.match, lines) if m]
    timed = ms[LLMC_SKIP_STEPS:]
    if not timed:
        last = next((l.strip() for l in reversed(lines) if l.strip()), "empty log")
        return None, f"{len(ms)} step lines, too few to time ({last[:120]})", 0
    median = statistics.median(timed)
    return tokens_per_step * 1000.0 / median, median, len(timed)


def srkit_rate(cells, strategy):
    for c in cells:
        if c.get("strategy") == strategy:
            if c.get("status") == "ok":
                return c["tokens_per_s"], c["ms_per_step"]["median"]
            return None, f"{c.get('status')}: {c.get('message', '')[:80]}"
    return None, "no cell"


def llmc_report(srkit_json, w0_log, w1_log, tokens_per_step, markdown=None):
    try:
        cells = json.load(open(srkit_json)).get("cells", [])
    except (OSError, ValueError) as e:
        cells = []
        print(f"report.py: {srkit_json}: {e}", file=sys.stderr)
    pairs = [("bf16-sr", "-w 0 (bf16 weights, its stochastic rounding)", w0_log),
             ("mixed", "-w 1 (fp32 master weights)", w1_log)]
    parts, section = [], []
    section.append("## srkit beside llm.c (gpt2-124m, one GPU, same shape, same run)\n")
    section.append("| srkit | tok/s | ms/step | llm.c | tok/s | ms/step | srkit / llm.c |")
    section.append("|---|---:|---:|---|---:|---:|---:|")
    for strategy, mode, log in pairs:
        ours, ours_ms = srkit_rate(cells, strategy)
        theirs, theirs_ms, steps = llmc_rate(log, tokens_per_step)
        flag = mode.split(" (")[0]
        if ours is None or theirs is None:
            why = []
            if ours is None:
                why.append(f"srkit {strategy}: {ours_ms}")
            if theirs is None:
                why.append(f"llm.c {flag}: {theirs_ms}")
            parts.append(f"{strategy} vs llm.c {flag}: not compared ({'; '.join(why)})")
            section.append(f"| {strategy} | {ours or '-'} | - | {mode} | {theirs or '-'} | - | - |")
            continue
        ratio = ours / theirs
        parts.append(f"{strategy} / llm.c {flag}: {ratio:.2f}x ({ours:.0f} vs {theirs:.0f} tok/s)")
        section.append(f"| {strategy} | {ours:.0f} | {ours_ms:.1f} | {mode} | {theirs:.0f} | "
                       f"{theirs_ms:.1f} (median of {steps}) | {ratio:.2f}x |")
    if markdown:
        with open(markdown, "a") as f:
            f.write("\n" + "\n".join(section) + "\n")
    return "| srkit / llm.c tok/s (gpt2-124m, B=16, T=1024) | " + "; ".join(parts) + " |"


def budget_rows(paths):
    rows = []
    for path in paths:
        try:
            r = json.load(open(path))
        except (OSError, ValueError) as e:
            rows.append(f"| equal memory ({path}) | no result: {e} |")
            continue
        choices = r.get("choices", [])
        if not choices:
            continue
        model, seq = choices[0]["model"], choices[0]["seq_len"]
        budget = r["budget_bytes"] / 2**30
        parts = []
        for c in choices:
            if c.get("chosen") is None:
                parts.append(f"{c['strategy']} does not fit (needs {c['least_bytes'] / 2**30:.1f} GiB)"
                             if c["least_bytes"] > r["budget_bytes"] else
                             f"{c['strategy']} none confirmed")
                continue
            k = c["candidates"][c["chosen"]]
            shape = f"{k['batch']}x{k['grad_accum']}" + (" +recompute" if k["recompute"] else "")
            parts.append(f"{c['strategy']} {shape} {k['cell']['tokens_per_s']:.0f} tok/s "
                         f"({fmt_ratio(c.get('vs_amp'))} amp, {fmt_ratio(c.get('vs_mixed'))} mixed)")
        rows.append(f"| equal memory: {model}, T={seq}, {r['tokens_per_step']} tok/step, "
                    f"{budget:.1f} GiB | " + "; ".join(parts) + " |")
    return rows


def main(argv):
    if len(argv) >= 2 and argv[0] == "train":
        print("\n".join(train_rows(argv[1])))
    elif len(argv) >= 5 and argv[0] == "llmc":
        markdown = argv[argv.index("--markdown") + 1] if "--markdown" in argv else None
        print(llmc_report(argv[1], argv[2], argv[3], int(argv[4]), markdown))
    elif len(argv) >= 2 and argv[0] == "budget":
        print("\n".join(budget_rows(argv[1:])))
    else:
        print(__doc__, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

#!/usr/bin/env python3
"""Merges kiln_cpu_bench --json and cpu_peers.py --json into bench/results/cpu-<date>.md: one table
with Kiln eager, Kiln compiled, PyTorch eager, torch.compile and ONNX Runtime per workload, ratios,
bytes moved, kernels launched, compile times. Why: the issue asks for one run, one file, with the
machine and the command that made it.
Usage: cpu_report.py --kiln K.json --peers P.json --out FILE.md --command "..." [--note TEXT]"""
import argparse
import datetime
import json
import platform
import subprocess


def rows(path):
    try:
        with open(path) as f:
            return [json.loads(line) for line in f if line.strip()]
    except FileNotFoundError:
        return []


def sh(cmd):
    try:
        return subprocess.run(cmd, shell=True, capture_output=True, text=True, timeout=20).stdout.strip()
    except Exception:  # noqa: BLE001 - the report still gets written
        return "?"


def cpu_model():
    for line in open("/proc/cpuinfo"):
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or "?"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kiln", required=True)
    ap.add_argument("--peers", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--command", required=True)
    ap.add_argument("--note", default="")
    a = ap.parse_args()
    torch_version = sh(".venv/bin/python -c 'import torch; print(torch.__version__)'")
    kiln = rows(a.kiln)
    header = next((r for r in kiln if "copy_gbs" in r), {})
    kiln = {r["workload"]: r for r in kiln if "workload" in r}
    peers = {r["workload"]: r for r in rows(a.peers)}
    f = lambda v, spec=".2f": "n/a" if v is None else format(v, spec)
    ratio = lambda x, y: "n/a" if x is None or y is None or x == 0 else f"{y / x:.2f}x"
    out = [f"# CPU benchmark: Kiln vs PyTorch / torch.compile / ONNX Runtime ({datetime.date.today()})", ""]
    out += [f"* Machine: {cpu_model()}, {sh('nproc')} cores visible, {sh('uname -sr')}",
            f"* Command: `{a.command}`",
            f"* Commit: {sh('git rev-parse --short HEAD')}{' (with local changes)' if sh('git status --porcelain') else ''}",
            f"* Compiler for generated code: {sh('${CXX:-g++} --version | head -1')}; OpenBLAS core: "
            f"{header.get('blas_core', '?')}; torch {torch_version}",
            f"* Copy bandwidth measured in the Kiln run: {f(header.get('copy_gbs'), '.1f')} GB/s "
            "(OpenMP `dst[i] = src[i]` over 32M floats, read + write counted)",
            "* Kiln's generated kernels are compiled with -march=native (as torch.compile's C++ backend targets "
            "the host ISA); `kiln_cpu_bench --portable` measures the default baseline-x86-64 flags.",
            "* Times are medians over the repeats after one warm-up, in ms; ratios are peer time / Kiln compiled "
            "time (> 1: Kiln is faster)."]
    if a.note:
        out += [f"* {a.note}"]
    out += ["", "| workload | Kiln eager | Kiln compiled | torch eager | torch.compile | ONNX Runtime "
            "| vs torch.compile | vs ORT | kernels eager / compiled | MB moved eager / compiled "
            "| compiled GB/s (% of copy) | Kiln compile cold / warm ms | torch.compile cold s |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    names = list(kiln) + [n for n in peers if n not in kiln]
    copy = header.get("copy_gbs")
    for n in names:
        k, p = kiln.get(n, {}), peers.get(n, {})
        kc = k.get("compiled_ms")
        gbs = k.get("compiled_gbs")
        pct = f" ({100 * gbs / copy:.0f}%)" if gbs is not None and copy else ""
        tc = p.get("torch_compile_ms")
        out.append(
            f"| {n} | {f(k.get('eager_ms'))} | {f(kc)} | {f(p.get('torch_eager_ms'))} | "
            f"{f(tc) if tc is not None else p.get('torch_compile_error', 'n/a')} | "
            f"{f(p.get('ort_ms')) if 'ort_ms' in p else p.get('ort_error', 'n/a')} | {ratio(kc, tc)} | "
            f"{ratio(kc, p.get('ort_ms'))} | {k.get('eager_kernels', 'n/a')} / {k.get('compiled_kernels', 'n/a')} | "
            f"{f(k.get('eager_mb'), '.0f')} / {f(k.get('compiled_mb'), '.0f')} | {f(gbs, '.1f')}{pct} | "
            f"{f(k.get('cold_compile_ms'), '.0f')} / {f(k.get('warm_compile_ms'), '.1f')} | "
            f"{f(p.get('torch_compile_cold_s'), '.1f')} |")
    out += ["", "Kiln compile times include kiln::optimize for the traced/imported graphs; cold = empty compile "
            "cache (the system compiler runs), warm = cache hit. Bytes moved count each buffer a kernel touches "
            "once (Kiln's scoreboard).", ""]
    with open(a.out, "w") as fh:
        fh.write("\n".join(out))
    print("\n".join(out))


if __name__ == "__main__":
    main()

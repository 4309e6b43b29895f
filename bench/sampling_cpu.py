#!/usr/bin/env python3
"""Sort and sampling on the CPU (issue 23): Kiln's compiled `sort` against torch.sort, and Kiln's
fused `sample` op against a torch sampling function (temperature -> top-k mask -> sort -> softmax
-> cumsum -> top-p mask -> multinomial, the Hugging Face warper chain) eager and under
torch.compile (Inductor), same shapes and threads, medians of repeated calls, written to
bench/results/ with the machine and the command. Logits are f32 standard-normal rows.

usage: .venv/bin/python bench/sampling_cpu.py [--threads 2] [--repeats 15] [--vocab 256000] [--out FILE.md]
"""
import argparse
import datetime
import os
import sys

import numpy as np

from cpu_models import machine, median_ms, write_report  # median_ms: repeated calls after two warm-ups

SORT_SHAPES = [(1, 256000), (64, 256000)]
SAMPLE_BATCHES = [1, 64, 256]
TEMPERATURE, TOP_K, TOP_P = 0.7, 50, 0.9


def kiln_sort(rows, n, threads):
    from kiln import _kiln
    g = _kiln.Graph("sort")
    x = g.input("x", "f32", [rows, n])
    values, indices = g.node("sort", [x], {"axis": -1, "descending": 1})
    g.set_outputs([values, indices])
    return _kiln.compile(g, "cpu", threads)


def kiln_sample(rows, vocab, threads, attrs):
    from kiln import _kiln
    g = _kiln.Graph("sample")
    logits = g.input("logits", "f32", [rows, vocab])
    seeds = g.input("seeds", "i64", [rows])
    steps = g.input("steps", "i64", [rows])
    g.set_outputs([g.node("sample", [logits, seeds, steps], attrs)[0]])
    return _kiln.compile(g, "cpu", threads)


def torch_sample(logits, temperature=TEMPERATURE, top_k=TOP_K, top_p=TOP_P):
    import torch
    logits = logits / temperature
    if top_k:
        kth = torch.topk(logits, top_k, dim=-1).values[..., -1:]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    if top_p < 1:
        sorted_logits, order = torch.sort(logits, dim=-1, descending=True)
        probs = sorted_logits.softmax(-1)
        drop = probs.cumsum(-1) - probs > top_p  # keep the token that crosses top_p
        sorted_logits = sorted_logits.masked_fill(drop, float("-inf"))
        choice = torch.multinomial(sorted_logits.softmax(-1), 1)
        return order.gather(-1, choice).squeeze(-1)
    return torch.multinomial(logits.softmax(-1), 1).squeeze(-1)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--repeats", type=int, default=15)
    p.add_argument("--vocab", type=int, default=256000)
    p.add_argument("--out", default="")
    a = p.parse_args()
    import torch
    torch.set_num_threads(a.threads)
    rng = np.random.default_rng(0)
    lines = ["## Sort (descending, values and indices)", "",
             "| shape | Kiln ms | torch.sort ms | torch.sort stable ms | vs torch | vs stable | same as torch stable |",
             "|---|---|---|---|---|---|---|"]
    for rows, n in SORT_SHAPES:
        x = rng.standard_normal((rows, n)).astype(np.float32)
        xt = torch.from_numpy(x)
        exe = kiln_sort(rows, n, a.threads)
        got = exe.run([x], ["f32"])
        kiln_ms = median_ms(lambda: exe.run([x], ["f32"]), a.repeats)
        torch_ms = median_ms(lambda: torch.sort(xt, dim=-1, descending=True), a.repeats)
        stable_ms = median_ms(lambda: torch.sort(xt, dim=-1, descending=True, stable=True), a.repeats)
        tv, ti = torch.sort(xt, dim=-1, descending=True, stable=True)
        same = bool(np.array_equal(got[0][0], tv.numpy()) and np.array_equal(got[1][0], ti.numpy()))
        lines.append(f"| {rows}x{n} | {kiln_ms:.3f} | {torch_ms:.3f} | {stable_ms:.3f} | {torch_ms / kiln_ms:.2f}x | "
                     f"{stable_ms / kiln_ms:.2f}x | {same} |")
        print(lines[-1], flush=True)

    def unfiltered(t):
        return torch_sample(t, 1.0, 0, 1.0)
    def top_p_only(t):
        return torch_sample(t, TEMPERATURE, 0, TOP_P)
    cases = [(f"top-k {TOP_K} + top-p {TOP_P}", {"temperature": TEMPERATURE, "top_k": TOP_K, "top_p": TOP_P},
              torch_sample, torch.compile(torch_sample, backend="inductor")),
             (f"top-p {TOP_P} only", {"temperature": TEMPERATURE, "top_p": TOP_P}, top_p_only,
              torch.compile(top_p_only, backend="inductor")),
             ("none (T = 1)", {"temperature": 1.0}, unfiltered, torch.compile(unfiltered, backend="inductor"))]
    lines += ["", f"## Sampling: temperature {TEMPERATURE}, top-k {TOP_K} + top-p {TOP_P}, top-p alone (standard-normal "
              f"logits are flat: the nucleus is most of the row), and no filter at temperature 1; vocabulary {a.vocab}", "",
              "| batch | filter | Kiln ms | torch eager ms | torch.compile ms | vs eager | vs compile |",
              "|---|---|---|---|---|---|---|"]
    for rows in SAMPLE_BATCHES:
        x = rng.standard_normal((rows, a.vocab)).astype(np.float32)
        xt = torch.from_numpy(x)
        seeds = np.arange(rows, dtype=np.int64) + 1234
        for label, attrs, fn, cfn in cases:
            exe = kiln_sample(rows, a.vocab, a.threads, attrs)
            step = [0]

            def run_kiln():
                step[0] += 1
                return exe.run([x, seeds, np.full(rows, step[0], dtype=np.int64)], ["f32", "i64", "i64"])
            run_kiln()
            kiln_ms = median_ms(run_kiln, a.repeats)
            eager_ms = median_ms(lambda: fn(xt), a.repeats)
            cfn(xt)
            compile_ms = median_ms(lambda: cfn(xt), a.repeats)
            lines.append(f"| {rows} | {label} | {kiln_ms:.3f} | {eager_ms:.3f} | {compile_ms:.3f} | "
                         f"{eager_ms / kiln_ms:.2f}x | {compile_ms / kiln_ms:.2f}x |")
            print(lines[-1], flush=True)
    env = ", ".join(f"{k}={os.environ[k]}" for k in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE") if k in os.environ) or "none set"
    text = (f"# Sort and sampling on the CPU: Kiln vs torch ({datetime.date.today()})\n\n"
            f"Machine: {machine()}; {a.threads} threads "
            f"(torch.set_num_threads, Kiln's executable); OpenBLAS variables: {env} (no BLAS call here). "
            f"Command: `{' '.join(sys.argv)}`. Medians of {a.repeats} calls after two warm-ups; f32 standard-normal "
            "rows. 'same as torch stable': values and indices identical to torch.sort(stable=True). The torch sampling "
            "function is the Hugging Face warper chain (temperature, top-k mask, sort, softmax, cumsum, top-p mask, "
            "multinomial); Kiln's sample op draws from the same distribution (docs/sampling.md) with its own "
            "random numbers, so tokens are not compared.\n\n" + "\n".join(lines) + "\n")
    write_report(text, a.out)


if __name__ == "__main__":
    main()

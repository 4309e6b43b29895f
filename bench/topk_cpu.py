#!/usr/bin/env python3
"""Top-k on the CPU (issue 23): Kiln's compiled topk against torch.topk (eager) and numpy
(argpartition + sort of the k), same shapes and threads, medians of repeated calls, written to
bench/results/ with the machine and the command. Rows are f32 logits-like values (standard normal).

usage: .venv/bin/python bench/topk_cpu.py [--threads 2] [--repeats 20] [--out FILE.md]
"""
import argparse
import datetime
import os
import sys

import numpy as np

from cpu_models import machine, median_ms, write_report  # median_ms: repeated calls after two warm-ups

SHAPES = [(1, 256000), (64, 256000), (256, 128000)]
KS = [1, 50, 1024]


def kiln_topk(rows, n, k):
    from kiln import _kiln
    g = _kiln.Graph("topk")
    x = g.input("x", "f32", [rows, n])
    values, indices = g.node("topk", [x], {"k": k, "axis": -1, "largest": 1, "sorted": 1})
    g.set_outputs([values, indices])
    return _kiln.compile(g, "cpu", int(os.environ.get("KILN_BENCH_THREADS", "2")))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--repeats", type=int, default=20)
    p.add_argument("--out", default="")
    a = p.parse_args()
    os.environ["KILN_BENCH_THREADS"] = str(a.threads)
    import torch
    torch.set_num_threads(a.threads)
    rng = np.random.default_rng(0)
    rows_md = ["| shape | k | Kiln ms | torch.topk ms | numpy argpartition ms | vs torch | vs numpy | same as torch |",
               "|---|---|---|---|---|---|---|---|"]
    for rows, n in SHAPES:
        x = rng.standard_normal((rows, n)).astype(np.float32)
        xt = torch.from_numpy(x)
        for k in KS:
            exe = kiln_topk(rows, n, k)
            got = exe.run([x], ["f32"])
            kiln_ms = median_ms(lambda: exe.run([x], ["f32"]), a.repeats)
            torch_ms = median_ms(lambda: torch.topk(xt, k, dim=-1, largest=True, sorted=True), a.repeats)

            def np_topk():
                part = np.argpartition(-x, k - 1, axis=-1)[:, :k]
                vals = np.take_along_axis(x, part, -1)
                order = np.argsort(-vals, axis=-1, kind="stable")
                return np.take_along_axis(vals, order, -1)
            np_ms = median_ms(np_topk, max(3, a.repeats // 4))
            tv, ti = torch.topk(xt, k, dim=-1, largest=True, sorted=True)
            # Values must equal torch's; indices too, except between equal values (Kiln puts the
            # lower index first, ONNX's rule; torch's order among ties is unspecified).
            gi, ti = got[1][0], ti.numpy()
            differ = gi != ti
            same = bool(np.array_equal(got[0][0], tv.numpy()) and
                        np.array_equal(np.take_along_axis(x, gi, -1)[differ], np.take_along_axis(x, ti, -1)[differ]))
            rows_md.append(f"| {rows}x{n} | {k} | {kiln_ms:.3f} | {torch_ms:.3f} | {np_ms:.3f} | "
                           f"{torch_ms / kiln_ms:.2f}x | {np_ms / kiln_ms:.2f}x | {same} |")
            print(rows_md[-1], flush=True)
    text = (f"# Top-k on the CPU: Kiln vs torch.topk and numpy ({datetime.date.today()})\n\n"
            f"Machine: {machine()}; {a.threads} threads "
            f"(torch.set_num_threads, Kiln's executable). Command: `{' '.join(sys.argv)}`. Medians of "
            f"{a.repeats} calls after two warm-ups; f32 standard-normal rows, k largest, sorted. "
            "'same as torch': values identical, and indices identical except among equal values (ties: Kiln puts the lower index first).\n\n" + "\n".join(rows_md) + "\n")
    write_report(text, a.out)


if __name__ == "__main__":
    main()

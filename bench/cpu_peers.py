#!/usr/bin/env python3
"""CPU peers for bench/cpu_bench.cc: PyTorch eager, torch.compile (Inductor C++ backend) and ONNX
Runtime on the same workloads, same thread count, medians over repeats. Prints markdown rows.
Usage: cpu_peers.py [--threads N] [--repeats R] [--only name]"""
import argparse
import io
import statistics
import time

import torch


def median_ms(fn, repeats):
    fn()
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t) * 1e3)
    return statistics.median(times)


def workloads():
    n = 32 << 20
    def chain(k):
        def f(x):
            for i in range(k):
                x = x * 1.0001 if i % 2 == 0 else x + 0.5
            return x
        return f
    for k in (1, 2, 4, 8):
        yield f"chain{k} 32M f32", chain(k), (torch.rand(n) * 2 - 1,)
    x = torch.rand(4096, 4096) * 2 - 1
    yield "softmax 4096x4096", lambda x: torch.softmax(x, -1), (x,)
    w, b = torch.rand(4096), torch.rand(4096)
    yield "layer_norm 4096x4096", lambda x, w, b: torch.nn.functional.layer_norm(x, (4096,), w, b), (x, w, b)
    a, W, bias = torch.rand(1024, 1024), torch.rand(1024, 4096), torch.rand(4096)
    yield "gelu(x@W+b) 1024x1024x4096", lambda a, W, bias: torch.nn.functional.gelu(a @ W + bias), (a, W, bias)


class Wrap(torch.nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, *args):
        return self.fn(*args)


def ort_session(fn, args, threads):
    try:
        import onnxruntime as ort
    except ImportError:
        return None
    buf = io.BytesIO()
    torch.onnx.export(Wrap(fn), args, buf, opset_version=17, dynamo=False)
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    sess = ort.InferenceSession(buf.getvalue(), opts, providers=["CPUExecutionProvider"])
    feeds = {i.name: a.numpy() for i, a in zip(sess.get_inputs(), args)}
    return lambda: sess.run(None, feeds)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--repeats", type=int, default=7)
    p.add_argument("--only", default="")
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    print(f"# peers: torch {torch.__version__}, {a.threads} threads, median of {a.repeats}\n")
    print("| workload | torch eager ms | torch.compile ms | torch.compile cold compile s | onnxruntime ms |")
    print("|---|---|---|---|---|")
    for name, fn, args in workloads():
        if a.only and a.only not in name:
            continue
        with torch.no_grad():
            eager = median_ms(lambda: fn(*args), a.repeats)
            compiled = torch.compile(fn)
            t = time.perf_counter()
            compiled(*args)
            cold = time.perf_counter() - t
            comp = median_ms(lambda: compiled(*args), a.repeats)
        try:
            run = ort_session(fn, args, a.threads)
            ort_ms = f"{median_ms(run, a.repeats):.2f}" if run else "n/a"
        except Exception as e:  # noqa: BLE001 - report, keep going
            ort_ms = f"failed ({type(e).__name__})"
        print(f"| {name} | {eager:.2f} | {comp:.2f} | {cold:.1f} | {ort_ms} |", flush=True)


if __name__ == "__main__":
    main()

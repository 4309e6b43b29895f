#!/usr/bin/env python3
"""Real models on the CPU (issue 21): Kiln compiled and eager (kiln_cpu_bench --onnx) against ONNX
Runtime (all graph optimisations), PyTorch eager and torch.compile (Inductor CPU), one run, medians,
written to bench/results/cpu-models-<date>.md with the machine and the command.

Models, exported from PyTorch with random weights at a fixed seed (nothing is downloaded; the legacy
exporter, opset 17, static shapes): torchvision ResNet-18, ResNet-50, MobileNetV3-small,
EfficientNet-B0, SqueezeNet 1.1, ShuffleNetV2 x1.0 at 224x224; a BERT-base encoder layer and a
GPT-2-small block (Hugging Face, one layer, from configs, 128 tokens); an MLP (512 -> 2048 -> 512,
gelu) over 1024 tokens. Batch 1 and 8, 1 and 2 threads (pinned with taskset). Each configuration
runs in its own processes, so thread settings cannot leak between columns.

The OpenBLAS variables this machine class sets (OPENBLAS_CORETYPE, OPENBLAS_L2_SIZE) only move
Kiln's columns (PyTorch uses MKL/oneDNN, ONNX Runtime its MLAS): --blas-both runs Kiln a second time
with both unset and reports that column too.

usage: bench/cpu_models.py [--only a,b] [--batches 1,8] [--threads 1,2] [--repeats 5] [--blas-both]
                           [--no-torch-compile] [--build DIR] [--out FILE]
       bench/cpu_models.py --peer MODEL BATCH THREADS REPEATS [--no-torch-compile]   (one peer row, JSON)
"""
import argparse
import datetime
import json
import os
import pathlib
import platform
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

CNNS = ["resnet18", "resnet50", "mobilenet_v3_small", "efficientnet_b0", "squeezenet1_1", "shufflenet_v2_x1_0"]
MODELS = CNNS + ["bert_layer", "gpt2_block", "mlp"]
SEQ = 128
MLP_TOKENS = 1024


def build(name, batch):
    """(torch module in eval mode, example inputs, input names) with random weights at seed 0."""
    import torch
    torch.manual_seed(0)
    if name in CNNS:
        import torchvision
        from real_models import enliven  # random batch-norm statistics: outputs that are not constant
        return enliven(getattr(torchvision.models, name)(weights=None)).eval(), [torch.randn(batch, 3, 224, 224)], ["x"]
    if name == "mlp":
        m = torch.nn.Sequential(torch.nn.Linear(512, 2048), torch.nn.GELU(), torch.nn.Linear(2048, 512))
        return m.eval(), [torch.randn(batch, MLP_TOKENS, 512)], ["x"]
    import transformers
    from real_models import HiddenState
    gen = torch.Generator().manual_seed(0)
    if name == "bert_layer":
        cfg = transformers.BertConfig(num_hidden_layers=1)
        model = HiddenState(transformers.BertModel(cfg), with_mask=True)
        ids = torch.randint(0, cfg.vocab_size, (batch, SEQ), generator=gen)
        mask = torch.ones(batch, SEQ, dtype=torch.int64)
        mask[:, SEQ - SEQ // 8:] = 0
        return model.eval(), [ids, mask], ["input_ids", "attention_mask"]
    if name == "gpt2_block":
        cfg = transformers.GPT2Config(n_layer=1, use_cache=False)
        model = HiddenState(transformers.GPT2Model(cfg), with_mask=False)
        return model.eval(), [torch.randint(0, cfg.vocab_size, (batch, SEQ), generator=gen)], ["input_ids"]
    raise SystemExit(f"cpu_models: unknown model '{name}' (known: {', '.join(MODELS)})")


def model_path(name, batch):
    return ROOT / ".cache" / "bench-models" / f"{name}-b{batch}" / "model.onnx"


def export(name, batch):
    path = model_path(name, batch)
    if path.exists():
        return path
    import torch
    model, inputs, names = build(name, batch)
    path.parent.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    with torch.no_grad():
        torch.onnx.export(model, tuple(inputs), str(path) + ".tmp", input_names=names, output_names=["output"],
                          opset_version=17, dynamo=False)
    os.replace(str(path) + ".tmp", path)
    print(f"cpu_models: exported {name} batch {batch} in {time.time() - t0:.0f} s", file=sys.stderr, flush=True)
    return path


def median_ms(fn, repeats):
    fn()
    fn()
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t) * 1e3)
    return statistics.median(times)


def peer_row(name, batch, threads, repeats, torch_compile):
    """PyTorch eager, torch.compile and ONNX Runtime on one configuration (in this process)."""
    import onnxruntime as ort
    import torch
    torch.set_num_threads(threads)
    model, inputs, _ = build(name, batch)
    row = {}
    with torch.no_grad():
        row["torch_eager_ms"] = median_ms(lambda: model(*inputs), repeats)
        if torch_compile:
            try:
                compiled = torch.compile(model)
                t = time.perf_counter()
                compiled(*inputs)
                row["torch_compile_cold_s"] = time.perf_counter() - t
                row["torch_compile_ms"] = median_ms(lambda: compiled(*inputs), repeats)
            except Exception as e:  # noqa: BLE001 - report, keep going
                row["torch_compile_error"] = f"{type(e).__name__}: {str(e)[:160]}"
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    sess = ort.InferenceSession(str(model_path(name, batch)), opts, providers=["CPUExecutionProvider"])
    feeds = {i.name: a.numpy() for i, a in zip(sess.get_inputs(), inputs)}
    row["ort_ms"] = median_ms(lambda: sess.run(None, feeds), repeats)
    return row


def pin(threads):
    have = subprocess.run("command -v taskset", shell=True, capture_output=True).returncode == 0
    return ["taskset", "-c", ",".join(str(c) for c in range(threads))] if have else []


def kiln_row(build_dir, name, batch, threads, repeats, env):
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        cmd = pin(threads) + [str(build_dir / "kiln_cpu_bench"), "--onnx", str(model_path(name, batch)), "--label",
                              f"{name} b{batch}", "--threads", str(threads), "--repeats", str(repeats), "--json", out.name]
        r = subprocess.run(cmd, env=env, capture_output=True, text=True)
        if r.returncode != 0:
            return {"error": (r.stderr.strip().splitlines() or ["?"])[-1][:200]}
        rows = [json.loads(line) for line in open(out.name) if line.strip()]
        return next((x for x in rows if "workload" in x), {"error": "no row"})


def machine():
    model = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
    return f"{model}, {os.cpu_count()} cores, {platform.platform()}"


def write_report(text, out):
    """Prints a results page and writes it to `out` (when given)."""
    print(text)
    if out:
        with open(out, "w") as f:
            f.write(text)


def fmt(x, spec=".2f"):
    return format(x, spec) if isinstance(x, (int, float)) else "n/a"


def ratio(peer, kiln):
    return f"{peer / kiln:.2f}x" if isinstance(peer, (int, float)) and isinstance(kiln, (int, float)) and kiln > 0 else "n/a"


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--peer", nargs=4, metavar=("MODEL", "BATCH", "THREADS", "REPEATS"))
    p.add_argument("--only", default="")
    p.add_argument("--batches", default="1,8")
    p.add_argument("--threads", default="1,2")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--blas-both", action="store_true")
    p.add_argument("--no-torch-compile", action="store_true")
    p.add_argument("--build", default=os.environ.get("KILN_BUILD_DIR", "build"))
    p.add_argument("--out", default="")
    a = p.parse_args()
    if a.peer:
        name, batch, threads, repeats = a.peer[0], int(a.peer[1]), int(a.peer[2]), int(a.peer[3])
        print(json.dumps(peer_row(name, batch, threads, repeats, not a.no_torch_compile)))
        return
    build_dir = ROOT / a.build
    if not (build_dir / "kiln_cpu_bench").exists():
        raise SystemExit(f"cpu_models: no {build_dir}/kiln_cpu_bench (bash scripts/build kiln_cpu_bench)")
    models = [m for m in a.only.split(",") if m] or MODELS
    batches = [int(b) for b in a.batches.split(",")]
    thread_counts = [int(t) for t in a.threads.split(",")]
    for m in models:
        for b in batches:
            export(m, b)
    env = dict(os.environ, MALLOC_MMAP_THRESHOLD_="2147483647", MALLOC_TRIM_THRESHOLD_="4294967295")
    plain_env = {k: v for k, v in env.items() if k not in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")}
    blas_note = f"OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE', '(unset)')}, " \
                f"OPENBLAS_L2_SIZE={os.environ.get('OPENBLAS_L2_SIZE', '(unset)')}"
    results = []
    for m in models:
        for b in batches:
            for t in thread_counts:
                row = {"model": m, "batch": b, "threads": t}
                k = kiln_row(build_dir, m, b, t, a.repeats, env)
                row.update({"kiln_ms": k.get("compiled_ms"), "kiln_eager_ms": k.get("eager_ms"),
                            "kernels": k.get("compiled_kernels"), "kiln_error": k.get("error")})
                if a.blas_both:
                    row["kiln_noblasenv_ms"] = kiln_row(build_dir, m, b, t, a.repeats, plain_env).get("compiled_ms")
                cmd = pin(t) + [sys.executable, __file__, "--peer", m, str(b), str(t), str(a.repeats)]
                if a.no_torch_compile:
                    cmd.append("--no-torch-compile")
                r = subprocess.run(cmd, env=env, capture_output=True, text=True)
                try:
                    row.update(json.loads(r.stdout.strip().splitlines()[-1]))
                except (IndexError, json.JSONDecodeError):
                    row["peer_error"] = (r.stderr.strip().splitlines() or ["?"])[-1][:200]
                results.append(row)
                print(json.dumps(row), file=sys.stderr, flush=True)
    today = datetime.date.today().isoformat()
    out = pathlib.Path(a.out or ROOT / "bench" / "results" / f"cpu-models-{today}.md")
    lines = [f"# Real models on the CPU: Kiln vs ONNX Runtime, PyTorch eager and torch.compile ({today})", "",
             f"Machine: {machine()}. {blas_note} as set for Kiln's columns"
             + ("; 'no OpenBLAS vars' is Kiln compiled with both unset" if a.blas_both else "") + ".",
             f"Command: `{' '.join(['bench/cpu_models.py'] + sys.argv[1:])}` (KILN_BUILD_DIR={a.build}). "
             f"Median of {a.repeats} runs after 2 warm-ups, each configuration in its own processes pinned to its "
             "threads' cores (taskset). Ratios are the peer's time over Kiln compiled's: above 1 means Kiln is faster.",
             "", "| model | batch | threads | Kiln compiled ms | Kiln eager ms |"
             + (" Kiln, no OpenBLAS vars ms |" if a.blas_both else "")
             + " ONNX Runtime ms | PyTorch eager ms | torch.compile ms | vs ORT | vs torch.compile | kernels |",
             "|---|---|---|---|---|" + ("---|" if a.blas_both else "") + "---|---|---|---|---|---|"]
    for r in results:
        kiln = r.get("kiln_ms")
        lines.append(f"| {r['model']} | {r['batch']} | {r['threads']} | {fmt(kiln) if kiln else r.get('kiln_error')} | "
                     f"{fmt(r.get('kiln_eager_ms'))} |" + (f" {fmt(r.get('kiln_noblasenv_ms'))} |" if a.blas_both else "")
                     + f" {fmt(r.get('ort_ms'))} | {fmt(r.get('torch_eager_ms'))} | "
                     f"{fmt(r.get('torch_compile_ms')) if 'torch_compile_error' not in r else 'error'} | "
                     f"{ratio(r.get('ort_ms'), kiln)} | {ratio(r.get('torch_compile_ms'), kiln)} | {fmt(r.get('kernels'), 'd')} |")
    errors = [r for r in results if r.get("kiln_error") or r.get("peer_error") or r.get("torch_compile_error")]
    for r in errors:
        lines.append(f"\n{r['model']} b{r['batch']} t{r['threads']}: "
                     + "; ".join(f"{k}: {r[k]}" for k in ("kiln_error", "peer_error", "torch_compile_error") if r.get(k)))
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(lines) + "\n")
    print(f"wrote {out}", file=sys.stderr)


if __name__ == "__main__":
    main()

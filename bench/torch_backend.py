"""torch.compile(backend="kiln") vs eager and Inductor on the CPU: time per call (median), cold and
warm compile time, graph breaks and what ran in torch, for the models of tests/python/test_models.py.
"kiln" is the default (under no_grad: parameters and buffers frozen, guarded); "kiln-unfrozen" passes
options={"freeze": False} (weights as runtime inputs).

Why: issue 22's measurement (backend="kiln" vs "inductor"); each backend runs in its own process so
caches and thread pools do not leak between them.
Usage: .venv/bin/python bench/torch_backend.py [--threads 2] [--repeats 20] [--only resnet18,bert] [--out FILE.md]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time


def build(name):
    import torch
    import torchvision
    import transformers
    torch.manual_seed(0)
    if name == "resnet18":
        return torchvision.models.resnet18().eval(), (torch.randn(1, 3, 224, 224),)
    if name == "mobilenet_v3_small":
        return torchvision.models.mobilenet_v3_small().eval(), (torch.randn(1, 3, 224, 224),)
    if name == "bert":
        cfg = transformers.BertConfig(num_hidden_layers=2, hidden_size=256, num_attention_heads=4,
                                      intermediate_size=1024)
        return transformers.BertModel(cfg).eval(), (torch.randint(0, 1000, (1, 128)),)
    if name == "gpt2":
        cfg = transformers.GPT2Config(n_layer=2, n_embd=256, n_head=4)
        return transformers.GPT2Model(cfg).eval(), (torch.randint(0, 1000, (1, 128)),)
    raise SystemExit(f"unknown model {name}")


def measure(name, backend, repeats, threads):
    """One model on one backend, in this process: prints a JSON line."""
    import torch
    torch.set_num_threads(threads)
    model, args = build(name)
    with torch.no_grad():
        if backend == "eager":
            fn = model
        elif backend == "kiln-unfrozen":  # parameters as runtime inputs (options={"freeze": False})
            import kiln
            fn = kiln.compile(model, options={"freeze": False})
        else:
            fn = torch.compile(model, backend=backend)
        t0 = time.perf_counter()
        fn(*args)
        first = time.perf_counter() - t0
        times = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            fn(*args)
            times.append(time.perf_counter() - t0)
    row = {"model": name, "backend": backend, "first_call_s": first, "median_ms": statistics.median(times) * 1e3}
    if backend.startswith("kiln"):
        import kiln.torch_backend as kt
        row["partitions"] = kt.STATS["partitions"]
        row["ops_in_torch"] = sum(len(r.torch_nodes) for r in kt.REPORTS)
    print(json.dumps(row))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--repeats", type=int, default=20)
    p.add_argument("--only", default="resnet18,mobilenet_v3_small,bert,gpt2")
    p.add_argument("--out", default="")
    p.add_argument("--one", nargs=2, help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.one:
        return measure(a.one[0], a.one[1], a.repeats, a.threads)
    rows = []
    for name in a.only.split(","):
        for backend, cache in [("eager", None), ("inductor", "cold"), ("inductor", "warm"), ("kiln", "cold"),
                               ("kiln", "warm"), ("kiln-unfrozen", "warm")]:
            env = dict(os.environ, OMP_NUM_THREADS=str(a.threads))
            cache_dir = os.path.join(tempfile.gettempdir(), f"kiln-bench-{backend}-{name}")  # per backend
            if cache == "cold":
                subprocess.run(["rm", "-rf", cache_dir])
            env["KILN_CACHE_DIR" if backend.startswith("kiln") else "TORCHINDUCTOR_CACHE_DIR"] = cache_dir
            r = subprocess.run([sys.executable, __file__, "--one", name, backend, "--repeats", str(a.repeats),
                                "--threads", str(a.threads)], capture_output=True, text=True, env=env)
            line = [l for l in r.stdout.splitlines() if l.startswith("{")]
            row = json.loads(line[-1]) if line else {"model": name, "backend": backend, "error": r.stderr[-300:]}
            row["cache"] = cache or "-"
            rows.append(row)
            print(json.dumps(row), flush=True)
    md = ["| model | backend | compile cache | first call s | median ms | partitions | ops in torch |",
          "|---|---|---|---|---|---|---|"]
    for r in rows:
        md.append(f"| {r['model']} | {r['backend']} | {r['cache']} | {r.get('first_call_s', float('nan')):.2f} | "
                  f"{r.get('median_ms', float('nan')):.2f} | {r.get('partitions', '')} | {r.get('ops_in_torch', '')} |")
    text = "\n".join(md)
    print(text)
    if a.out:
        with open(a.out, "w") as f:
            f.write(f"# torch.compile backends on the CPU ({a.threads} threads)\n\n"
                    f"`{' '.join(sys.argv)}`\n\n{text}\n")


if __name__ == "__main__":
    main()

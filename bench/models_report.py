"""Writes bench/results/gpu-h200-models-<date>.md from one GPU call's output of scripts/gpu-models.sh
(models.md: each real model against PyTorch in f32 and bf16) and scripts/gpu-models-bench.sh
(models-kiln.json from kiln-gpu-bench --model, models-peers.jsonl from real_models.py time), as
ratios against PyTorch eager and torch.compile. Why: the results file is generated from the
measurements, never typed in.
   usage: python3 bench/models_report.py RESULTS_DIR OUT.md "command that produced RESULTS_DIR"
"""
import datetime
import json
import os
import sys

src, out, command = sys.argv[1], sys.argv[2], sys.argv[3]
L = []
w = L.append
device = open(f"{src}/models-device.txt").read().strip() if os.path.exists(f"{src}/models-device.txt") else "NVIDIA H200"
w(f"# Real models on the GPU: Kiln vs PyTorch ({device.split(',')[0]})")
w("")
w(f"Date: {datetime.date.today()}. Machine: {device} (the device tool's H200 host). Command: `{command}`; "
  f"this file: `python3 bench/models_report.py {src} {out} ...`.")
w("Models: `scripts/real_models.py` (torchvision and Hugging Face architectures from their own code, random "
  "weights at a fixed seed, batch-norm statistics randomised so no output is constant; nothing downloaded).")
w("")
if os.path.exists(f"{src}/models.md"):
    w("## Correctness: `kiln run --device cuda --expect` against PyTorch's f32 output on the CPU")
    w("")
    w("f32 rows: every element within atol 1e-4 + rtol 1e-3 of PyTorch's f32 output. bf16 rows run the f32 model "
      "through `--dtype bf16` (16-bit storage, f32 accumulation) and pass when Kiln's relative L2 error against "
      "the f32 output is within 2x PyTorch's own bf16 run's (or 1e-2): `scripts/real_models.py compare`.")
    w("")
    L.extend(open(f"{src}/models.md").read().rstrip().splitlines())
    w("")
kiln = json.load(open(f"{src}/models-kiln.json")) if os.path.exists(f"{src}/models-kiln.json") else {}
peers = {}
if os.path.exists(f"{src}/models-peers.jsonl"):
    for line in open(f"{src}/models-peers.jsonl"):
        if line.strip().startswith("{"):
            row = json.loads(line)
            peers[row["model"]] = row
if kiln or peers:
    w("## Speed at batch 32 (CNNs) / 8 x 512 tokens (transformers), bf16")
    w("")
    w("Kiln: median of 20 CUDA-event-timed replays of the captured graph (`kiln-gpu-bench --model`; compile cold "
      "= into an empty cache, warm = a cache hit); PyTorch: median of 20 event-timed calls (eager, and torch.compile "
      "mode default after its warm-up); same shapes, same dtype, the device call(s) named in Command. Ratios above "
      "1 mean Kiln is faster.")
    w("")
    w("| model | Kiln ms | kernels | MB moved | compile cold s | warm s | eager ms | torch.compile ms (compile s) | vs eager | vs torch.compile | slowest Kiln steps |")
    w("|---|---|---|---|---|---|---|---|---|---|---|")
    for key, k in kiln.items():
        if not key.startswith("model_") or not isinstance(k, dict):
            continue
        name = key[len("model_"):].rsplit("_", 1)[0]  # model_resnet50-legacy_bf16
        model = name.rsplit("-", 1)[0]
        p = peers.get(model, {})
        eager, comp = p.get("eager_ms"), p.get("compiled_default_ms")
        slow = "; ".join(f"{s['step']} {s['us']:.0f} us" for s in k.get("slowest", [])[:3])
        ms = k["ms"]
        fmt = lambda v: "" if v is None else f"{v:.3f}"
        ratio = lambda v: "" if v is None else f"{v / ms:.2f}x"
        compile_s = p.get("compile_default_s")
        comp_cell = fmt(comp) + ("" if compile_s is None else f" ({compile_s:.0f})")
        ro = p.get("compiled_reduce-overhead_ms")
        if ro is not None:  # CUDA graphs, as Kiln replays them
            comp_cell += f"; reduce-overhead {ro:.3f} = {ms and ro / ms:.2f}x"
        w(f"| {name} | {ms:.3f} | {k['kernels']} | {k['MB_moved']:.0f} | {k['compile_cold_s']:.2f} | "
          f"{k['compile_warm_s']:.3f} | {fmt(eager)} | {comp_cell} | {ratio(eager)} | {ratio(comp)} | {slow} |")
    for key, k in kiln.items():
        if key.endswith("_error"):
            w(f"| {key} | error: {k} | | | | | | | | | |")
    w("")
    w("Issue 20's target is >= 1.2x torch.compile on every model.")
open(out, "w").write("\n".join(L) + "\n")
print(f"wrote {out}")

#!/usr/bin/env python3
"""Real architectures, exported from PyTorch with random weights, for Kiln's GPU (issue 20) and CPU
(issue 21) model runs: torchvision ResNet-50, MobileNetV3-Large, EfficientNet-B0, ConvNeXt-T,
ViT-B/16, and Hugging Face BERT (base), GPT-2 (small) and a LLaMA-architecture model built from
configs. Nothing is downloaded; weights come from each library's own initialisation at a fixed seed.

  export: writes OUT/<model>-<exporter>/{model.onnx, input_<i>.npy, output_0.npy, inputs.txt} with
          both exporters (torch.onnx.export dynamo=False, "legacy", and dynamo=True, "dynamo");
          inputs.txt lists the graph's input names in order (for `kiln run --input`).
  time:   PyTorch eager and torch.compile on the same inputs on the GPU (median ms), as JSON lines.
  compare: a 16-bit run's output against the f32 reference, with PyTorch's own bf16 error as the bound.

usage: python3 scripts/real_models.py export [--out DIR] [--only a,b] [--exporters legacy,dynamo] [--jobs N] [--bench-shapes]
       python3 scripts/real_models.py time [--only a,b] [--dtype bf16|f32] [--batch N] [--compile-modes default,max-autotune]
       python3 scripts/real_models.py compare KILN.npy F32_REFERENCE.npy BF16_REFERENCE.npy
"""
import argparse
import json
import os
import pathlib
import sys
import time
import traceback

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

MODELS = ["resnet50", "mobilenet_v3_large", "efficientnet_b0", "convnext_tiny", "vit_b_16", "bert", "gpt2", "llama"]
CNNS = {"resnet50", "mobilenet_v3_large", "efficientnet_b0", "convnext_tiny", "vit_b_16"}


class HiddenState:
    """Wraps a Hugging Face model so it returns last_hidden_state only (one tensor output)."""

    def __new__(cls, model, with_mask):
        import torch

        class Wrapped(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.m = model

            def forward(self, input_ids, attention_mask=None):
                if attention_mask is None:  # decoders: no padding; an explicit mask keeps the legacy
                    attention_mask = torch.ones_like(input_ids)  # exporter off torch.diff (packed-sequence check)
                return self.m(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state

        return Wrapped()


def enliven(model):
    """Random batch-norm statistics and affine parameters, random values for parameters the library
    initialises to zero (ViT's head, every bias of a Hugging Face model) and a random spread around
    those it fills with one value (layer-norm weights of 1): with the libraries' own init the outputs
    of MobileNetV3, EfficientNet and ViT are constant or ~1e-10 (a constant output checks nothing),
    and a transformer's biases are all zero, which no trained checkpoint has (the compiler then
    sees scalar adds where a real model has bias vectors: other kernels, other epilogues)."""
    import torch
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, torch.nn.modules.batchnorm._BatchNorm):
                m.running_mean.copy_(torch.randn(m.running_mean.shape, generator=g) * 0.1)
                m.running_var.copy_(torch.rand(m.running_var.shape, generator=g) + 0.5)
                if m.affine:
                    m.weight.copy_(torch.rand(m.weight.shape, generator=g) + 0.5)
                    m.bias.copy_(torch.randn(m.bias.shape, generator=g) * 0.1)
        for p in model.parameters():
            if p.numel() <= 1 or float(p.max()) != float(p.min()):
                continue
            if float(p.abs().max()) == 0:
                p.copy_(torch.randn(p.shape, generator=g) * 0.02)
            else:
                p.mul_(1 + 0.1 * torch.randn(p.shape, generator=g))
    return model


def build(name, batch=1, seq=128):
    """(model, inputs, input_names) with random weights at seed 0."""
    import torch
    torch.manual_seed(0)
    if name in CNNS:
        import torchvision
        torch.backends.mha.set_fastpath_enabled(False)  # ViT's fused MHA has no ONNX export
        model = enliven(getattr(torchvision.models, name)(weights=None))
        return model.eval(), [torch.randn(batch, 3, 224, 224)], ["x"]
    import transformers
    gen = torch.Generator().manual_seed(0)
    if name == "bert":
        cfg = transformers.BertConfig()
        model = HiddenState(enliven(transformers.BertModel(cfg)), with_mask=True)
        ids = torch.randint(0, cfg.vocab_size, (batch, seq), generator=gen)
        mask = torch.ones(batch, seq, dtype=torch.int64)
        mask[:, seq - seq // 8:] = 0  # padded tail: the mask matters
        return model.eval(), [ids, mask], ["input_ids", "attention_mask"]
    if name == "gpt2":
        cfg = transformers.GPT2Config(use_cache=False)
        model = HiddenState(enliven(transformers.GPT2Model(cfg)), with_mask=False)
        return model.eval(), [torch.randint(0, cfg.vocab_size, (batch, seq), generator=gen)], ["input_ids"]
    if name == "llama":
        cfg = transformers.LlamaConfig(hidden_size=512, intermediate_size=1376, num_hidden_layers=4,
                                       num_attention_heads=8, num_key_value_heads=4, vocab_size=32000,
                                       max_position_embeddings=2048, use_cache=False)
        model = HiddenState(enliven(transformers.LlamaModel(cfg)), with_mask=False)
        return model.eval(), [torch.randint(0, cfg.vocab_size, (batch, seq), generator=gen)], ["input_ids"]
    raise SystemExit(f"real_models: unknown model '{name}' (known: {', '.join(MODELS)})")


def export_one(job):
    name, exporter, out, batch, seq = job
    import numpy as np
    import torch
    torch.set_num_threads(2)
    d = pathlib.Path(out) / f"{name}-{exporter}"
    d.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    try:
        model, inputs, names = build(name, batch=batch, seq=seq)
        bench = batch > 1  # bench shapes: no reference output (timing only; correctness runs at batch 1)
        with torch.no_grad():
            ref = None if bench else model(*inputs)
            torch.onnx.export(model, tuple(inputs), str(d / "model.onnx"), input_names=names, output_names=["output"],
                              opset_version=17 if exporter == "legacy" else 18, dynamo=exporter == "dynamo",
                              external_data=False)
        for i, t in enumerate(inputs):
            np.save(d / f"input_{i}.npy", t.numpy())
        (d / "inputs.txt").write_text("\n".join(names) + "\n")
        if bench:
            return f"exported {d.name} at batch {batch} in {time.time() - t0:.0f} s"
        np.save(d / "output_0.npy", ref.detach().float().numpy())
        # PyTorch's own bf16 run of the same model and input: how far 16-bit storage moves this
        # model's output from f32, the yardstick a bf16 compiler is judged by (`compare`).
        try:
            low = [t.to(torch.bfloat16) if t.is_floating_point() else t for t in inputs]
            with torch.no_grad():
                ref16 = model.to(torch.bfloat16)(*low)
            np.save(d / "output_bf16.npy", ref16.detach().float().numpy())
        except Exception as e:  # a CPU bf16 kernel PyTorch lacks: the bf16 row says so
            (d / "NO_BF16_REFERENCE").write_text(f"{type(e).__name__}: {e}\n")
        std = float(ref.float().std())
        if not std > 1e-3 * float(ref.float().abs().mean() + 1e-30) or std < 1e-6:
            (d / "EXPORT_FAILED").write_text(f"degenerate reference output (std {std:.3g}): it would check nothing\n")
            return f"FAILED {d.name}: degenerate output, std {std:.3g}"
        return f"exported {d.name} in {time.time() - t0:.0f} s (output std {std:.3g})"
    except Exception as e:  # one model's failure must not stop the others
        (d / "EXPORT_FAILED").write_text(traceback.format_exc())
        return f"FAILED {d.name}: {type(e).__name__}: {str(e)[:300]}"


def cmd_export(args):
    import multiprocessing as mp
    only = [m for m in args.only.split(",") if m] or MODELS
    jobs = [(m, e, args.out, args.batch or (32 if m in CNNS else 8) if args.bench_shapes else 1,
             args.seq if args.bench_shapes else 128) for m in only for e in args.exporters.split(",")]
    ctx = mp.get_context("spawn")
    with ctx.Pool(args.jobs) as pool:
        for line in pool.imap_unordered(export_one, jobs):
            print("real_models:", line, flush=True)


def median_ms(fn, warmup=3, reps=20):
    import torch
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    times.sort()
    return times[len(times) // 2]


def cmd_time(args):
    import torch
    dtype = {"bf16": torch.bfloat16, "f16": torch.float16, "f32": torch.float32}[args.dtype]
    for name in [m for m in args.only.split(",") if m] or MODELS:
        batch = args.batch or (32 if name in CNNS else 8)
        seq = args.seq
        model, inputs, _ = build(name, batch=batch, seq=seq)
        model = model.cuda().to(dtype)
        inputs = [t.cuda().to(dtype) if t.is_floating_point() else t.cuda() for t in inputs]
        row = {"model": name, "dtype": args.dtype, "batch": batch, "seq": None if name in CNNS else seq}
        with torch.no_grad():
            row["eager_ms"] = median_ms(lambda: model(*inputs))
            for mode in args.compile_modes.split(","):
                try:
                    torch._dynamo.reset()
                    compiled = torch.compile(model, mode=None if mode == "default" else mode)
                    t0 = time.time()
                    compiled(*inputs)
                    torch.cuda.synchronize()
                    row[f"compile_{mode}_s"] = time.time() - t0
                    row[f"compiled_{mode}_ms"] = median_ms(lambda: compiled(*inputs))
                except Exception as e:
                    row[f"compiled_{mode}_error"] = f"{type(e).__name__}: {str(e)[:200]}"
        print(json.dumps(row), flush=True)


def rel_l2(a, b):
    import numpy as np
    return float(np.linalg.norm((a - b).ravel()) / max(np.linalg.norm(b.ravel()), 1e-30))


def cmd_compare(args):
    """Kiln's 16-bit output against the f32 reference, next to PyTorch's own 16-bit output: passes
    when Kiln's relative L2 error is within 2x PyTorch's (or 1e-2): 16-bit storage is not free, and
    a model that amplifies it does so for every compiler."""
    import numpy as np
    got, want, ref16 = (np.load(f).astype(np.float64) for f in (args.got, args.want, args.ref16))
    if got.shape != want.shape:
        print(f"compare: shape {got.shape} vs {want.shape}")
        return 1
    kiln_err, torch_err = rel_l2(got, want), rel_l2(ref16, want)
    bound = max(2 * torch_err, 1e-2)
    ok = bool(np.isfinite(got).all()) and kiln_err <= bound
    print(f"relative L2 error vs f32: kiln {kiln_err:.3g}, PyTorch bf16 {torch_err:.3g} (bound {bound:.3g}); "
          f"max abs: kiln {np.abs(got - want).max():.3g}, PyTorch bf16 {np.abs(ref16 - want).max():.3g} "
          f"{'OK' if ok else 'MISMATCH'}")
    return 0 if ok else 1


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    e = sub.add_parser("export")
    e.add_argument("--out", default=".cache/real-models")
    e.add_argument("--only", default="")
    e.add_argument("--exporters", default="legacy,dynamo")
    e.add_argument("--jobs", type=int, default=max(1, min(8, (os.cpu_count() or 2) // 2)))
    e.add_argument("--bench-shapes", action="store_true",
                   help="batch 32 (CNNs) / 8 x --seq tokens (transformers) instead of 1 / 1 x 128")
    e.add_argument("--batch", type=int, default=0)
    e.add_argument("--seq", type=int, default=512)
    t = sub.add_parser("time")
    t.add_argument("--only", default="")
    t.add_argument("--dtype", default="bf16")
    t.add_argument("--batch", type=int, default=0)
    t.add_argument("--seq", type=int, default=512)
    t.add_argument("--compile-modes", default="default,max-autotune")
    c = sub.add_parser("compare")
    c.add_argument("got")
    c.add_argument("want")
    c.add_argument("ref16")
    args = ap.parse_args()
    return {"export": cmd_export, "time": cmd_time, "compare": cmd_compare}[args.cmd](args)


if __name__ == "__main__":
    sys.exit(main())

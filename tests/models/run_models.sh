#!/usr/bin/env bash
# Runs the `models` CTest label: generates the exported models once (scripts/gen_models.py, into
# .cache/models) and checks each with kiln_onnx_model_check. Exits 77 (skip) without torch.
set -u
checker="$1"
cd "$(dirname "$0")/../.."
out=.cache/models
if [ ! -x .venv/bin/python ] || ! .venv/bin/python -c "import torch, torchvision" 2>/dev/null; then
  echo "onnx_models: SKIPPED: .venv lacks torch/torchvision (scripts/install-deps)"; exit 77
fi
for m in resnet18 mobilenet_v3_small transformer_layer minilm_l6; do
  [ -f "$out/$m/output_0.npy" ] || .venv/bin/python scripts/gen_models.py --out "$out" --only "$m" || exit 1
done
fail=0
for m in resnet18 mobilenet_v3_small transformer_layer minilm_l6; do
  "$checker" "$out/$m" 1e-3 1e-4 || fail=1
done
exit $fail

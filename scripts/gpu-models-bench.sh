#!/usr/bin/env bash
# Runs on the GPU machine over the bundle scripts/gpu-run made (.gpu/): the real models of
# scripts/real_models.py at bench shapes (batch 32 for CNNs, 8 x 512 tokens for transformers),
# Kiln first (`kiln-gpu-bench --model`: compile cold and warm, median graph replay, kernels and
# bytes per run), then PyTorch eager and torch.compile on the same shapes and dtype, in one call so
# the ratios compare like with like. Writes $OUT/models-kiln.json and $OUT/models-peers.jsonl;
# bench/models_report.py turns them into bench/results/gpu-models-*.md.
#   usage: bash scripts/gpu-models-bench.sh [--only a,b] [--dtype bf16] [--compile-modes default,max-autotune]
#                                           [--kiln-only | --peers-only]
set -u
cd "$(dirname "$0")/.."
out=${OUT:-gpu-results}
mkdir -p "$out"
models=${KILN_BENCH_MODELS_DIR:-/tmp/kiln-bench-models}
only="" dtype=bf16 modes=default kiln=1 peers=1
while [ $# -gt 0 ]; do
  case "$1" in
    --only) only=$2; shift 2 ;;
    --dtype) dtype=$2; shift 2 ;;
    --compile-modes) modes=$2; shift 2 ;;
    --kiln-only) peers=0; shift ;;
    --peers-only) kiln=0; shift ;;
    *) echo "usage: $0 [--only a,b] [--dtype bf16] [--compile-modes default,max-autotune] [--kiln-only|--peers-only]" >&2; exit 2 ;;
  esac
done
if [ -f .gpu/gpu-bundle.tar.xz ]; then tar -xJf .gpu/gpu-bundle.tar.xz -C .gpu && rm .gpu/gpu-bundle.tar.xz; fi
export LD_LIBRARY_PATH=$PWD/.gpu:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export KILN_CACHE_DIR=${KILN_CACHE_DIR:-/tmp/kiln-gpu-cache}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader > "$out/models-device.txt"
if [ $kiln = 1 ]; then
  # The legacy exporter folds batch norm into the convs (what a deployed CNN looks like); models it
  # cannot export come from the dynamo exporter.
  python3 scripts/real_models.py export --bench-shapes --out "$models" --exporters legacy,dynamo \
    ${only:+--only "$only"} --jobs "${KILN_EXPORT_JOBS:-12}" > "$out/models-bench-export.log" 2>&1
  args=()
  for m in $(echo "${only:-resnet50,mobilenet_v3_large,efficientnet_b0,convnext_tiny,vit_b_16,bert,gpt2,llama}" | tr , ' '); do
    if [ -f "$models/$m-legacy/model.onnx" ]; then args+=(--model "$models/$m-legacy/model.onnx")
    elif [ -f "$models/$m-dynamo/model.onnx" ]; then args+=(--model "$models/$m-dynamo/model.onnx"); fi
  done
  .gpu/kiln-gpu-bench "${args[@]}" --dtype "$dtype" --json "$out/models-kiln.json" > "$out/models-kiln.log" 2>&1
  tail -n 20 "$out/models-kiln.log" | cut -c1-400
fi
if [ $peers = 1 ]; then
  python3 scripts/real_models.py time ${only:+--only "$only"} --dtype "$dtype" --compile-modes "$modes" \
    > "$out/models-peers.jsonl" 2> "$out/models-peers.log"
  cat "$out/models-peers.jsonl"
fi

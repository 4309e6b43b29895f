#!/usr/bin/env bash
# Runs on the GPU machine over the bundle scripts/gpu-run made (.gpu/): what CudaCompileOptions::
# depthwise_kernel needs before it can become the default (docs/cuda.md): the register-tiled and
# channels-last depthwise kernels against the interpreter, ConvNeXt-T / EfficientNet-B0 /
# MobileNetV3-Large at bench shapes in bf16 with depthwise convs on cuDNN (`--conv cudnn`) and on
# Kiln's kernels (`--conv depthwise`, channels-last where it pays; and without the channels-last
# pass), ConvNeXt-T with them against PyTorch (f32 and bf16), and torch.compile on the same shapes.
# Why: session 19 wrote them with no GPU lent; this is the one call that decides. Results in $OUT.
set -u
cd "$(dirname "$0")/.."
out=${OUT:-gpu-results}
mkdir -p "$out"
if [ -f .gpu/gpu-bundle.tar.xz ]; then tar -xJf .gpu/gpu-bundle.tar.xz -C .gpu && rm .gpu/gpu-bundle.tar.xz; fi
export LD_LIBRARY_PATH=$PWD/.gpu:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-} KILN_CACHE_DIR=${KILN_CACHE_DIR:-/tmp/kiln-gpu-cache}
models=${KILN_BENCH_MODELS_DIR:-/tmp/kiln-bench-models}
nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv,noheader | tee "$out/device.txt"
python3 scripts/real_models.py export --bench-shapes --out "$models" --exporters legacy \
  --only convnext_tiny,efficientnet_b0,mobilenet_v3_large --jobs 3 > "$out/export.log" 2>&1 &
exporting=$!
.gpu/test_cuda --gtest_brief=1 --gtest_filter='CudaLibraryKernels.*:CudaChannelsLast.*' > "$out/test-depthwise.log" 2>&1
echo "depthwise tests: exit $?"; tail -3 "$out/test-depthwise.log"; grep -A4 Failure "$out/test-depthwise.log" | head -30
wait $exporting
for m in convnext_tiny efficientnet_b0 mobilenet_v3_large; do
  for conv in cudnn depthwise; do
    .gpu/kiln-gpu-bench --model "$models/$m-legacy/model.onnx" --dtype bf16 --conv $conv --steps "$out/steps-$m-$conv.txt" \
      2>&1 | grep -o '"ms": [0-9.]*, "compile_cold_s[^,]*, "compile_warm_s[^,]*, "kernels": [0-9]*' | sed "s/^/$m $conv /"
  done
done
KILN_DISABLE_PASSES=cuda-channels-last .gpu/kiln-gpu-bench --model "$models/convnext_tiny-legacy/model.onnx" --dtype bf16 \
  --conv depthwise 2>&1 | grep -o '"ms": [0-9.]*' | sed "s/^/convnext_tiny depthwise, no channels-last /"
OUT="$out/models" bash scripts/gpu-models.sh --only convnext_tiny --exporters legacy --dtypes bf16,f32 -- --cuda-depthwise \
  > "$out/gpu-models.log" 2>&1
cut -c1-220 "$out/models/models.md" 2>/dev/null | tail -3
python3 scripts/real_models.py time --only convnext_tiny,efficientnet_b0,mobilenet_v3_large --dtype bf16 \
  --compile-modes default > "$out/peers.log" 2>&1; tail -8 "$out/peers.log" | cut -c1-250

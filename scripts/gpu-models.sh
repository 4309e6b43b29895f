#!/usr/bin/env bash
# Runs on the GPU machine over the bundle scripts/gpu-run made (.gpu/): exports the real models of
# scripts/real_models.py (random weights, both exporters; PyTorch's CPU output is the reference)
# and runs each with `kiln run --device cuda --expect`, then writes $OUT/models.md (one row per
# model: exported, compiled, matched, max error, kernels) and keeps the logs in one archive. Why:
# issue 20's "every real model on the H200"; the GPU machine has PyTorch, this one need not.
#   usage: bash scripts/gpu-models.sh [--only resnet50,bert] [--exporters legacy,dynamo] [--dtypes f32,bf16]
#                                     [-- extra kiln run flags]
#   KILN_DEVICE=cpu KILN_BIN=build/kiln runs the same check on the CPU (issue 21), here or anywhere.
set -u
cd "$(dirname "$0")/.."
out=${OUT:-gpu-results}
mkdir -p "$out"
models=${KILN_MODELS_DIR:-/tmp/kiln-real-models}
only="" exporters="legacy,dynamo" dtypes="f32,bf16"
while [ $# -gt 0 ]; do
  case "$1" in
    --only) only=$2; shift 2 ;;
    --exporters) exporters=$2; shift 2 ;;
    --dtypes) dtypes=$2; shift 2 ;;
    --) shift; break ;;
    *) echo "usage: $0 [--only a,b] [--exporters legacy,dynamo] [-- kiln run flags]" >&2; exit 2 ;;
  esac
done
if [ -f .gpu/gpu-bundle.tar.xz ]; then tar -xJf .gpu/gpu-bundle.tar.xz -C .gpu && rm .gpu/gpu-bundle.tar.xz; fi
export LD_LIBRARY_PATH=$PWD/.gpu:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export KILN_CACHE_DIR=${KILN_CACHE_DIR:-/tmp/kiln-gpu-cache}
export KILN_BIN=${KILN_BIN:-.gpu/kiln} KILN_DEVICE=${KILN_DEVICE:-cuda}
export KILN_PYTHON_BIN=${KILN_PYTHON:-python3}
py=$KILN_PYTHON_BIN
start=$(date +%s)
"$py" scripts/real_models.py export --out "$models" --exporters "$exporters" ${only:+--only "$only"} \
  --jobs "${KILN_EXPORT_JOBS:-8}" > "$out/models-export.log" 2>&1 || true
mkdir -p "$models"
echo "exported in $(( $(date +%s) - start )) s" | tee -a "$out/models-export.log"

report="$out/models.md"
{
  echo "| model | exporter | dtype | result | error vs PyTorch (f32, on the CPU) | kernels | library calls |"
  echo "|---|---|---|---|---|---|---|"
} > "$report"
# One model in one dtype: its row of the report in $d/row-<dtype>.md, its log in $d/run-<dtype>.log.
run_one() {
  d=${1%/}
  dtype=$2
  shift 2
  name=$(basename "$d")
  model=${name%-*} exporter=${name##*-}
  if [ ! -f "$d/model.onnx" ] || [ -f "$d/EXPORT_FAILED" ]; then
    echo "| $model | $exporter | $dtype | export failed: $(tail -1 "$d/EXPORT_FAILED" 2>/dev/null | cut -c1-120) | | | |" > "$d/row-$dtype.md"
    return
  fi
  args=()
  i=0
  while read -r input; do
    args+=(--input "$input=$d/input_$i.npy")
    i=$((i + 1))
  done < "$d/inputs.txt"
  log="$d/run-$dtype.log"
  t0=$(date +%s)
  if [ "$dtype" = f32 ]; then  # elementwise, at f32's tolerance
    timeout "${KILN_MODEL_TIMEOUT:-300}" "$KILN_BIN" run "$d/model.onnx" --device "$KILN_DEVICE" "${args[@]}" \
      --expect "output=$d/output_0.npy" "$@" > "$log" 2>&1
    rc=$?
    err=$(grep -m1 'vs expected' "$log" | sed 's/.*vs expected: //' | cut -c1-80)
  else  # 16 bits: relative L2 error against f32, bounded by PyTorch's own 16-bit error
    timeout "${KILN_MODEL_TIMEOUT:-300}" "$KILN_BIN" run "$d/model.onnx" --device "$KILN_DEVICE" --dtype "$dtype" "${args[@]}" \
      --save "$d/out-$dtype" "$@" > "$log" 2>&1
    rc=$?
    if [ $rc = 0 ] && [ -f "$d/output_bf16.npy" ]; then
      "$KILN_PYTHON_BIN" scripts/real_models.py compare "$d/out-$dtype/output.npy" "$d/output_0.npy" "$d/output_bf16.npy" >> "$log" 2>&1
      rc=$?
      [ $rc = 1 ] && echo "MISMATCH" >> "$log"
    fi
    err=$(grep -m1 'relative L2' "$log" | cut -c1-160)
  fi
  secs=$(( $(date +%s) - t0 ))
  kernels=$(grep -m1 -o '[0-9]* generated kernels' "$log" | cut -d' ' -f1)
  library=$(grep -m1 -o '[0-9]* library calls' "$log" | cut -d' ' -f1)
  case $rc in
    0) result="matches PyTorch (${secs} s)" ;;
    1) result=$(grep -q MISMATCH "$log" && echo "MISMATCH" || echo "error: $(grep -m1 -i 'error' "$log" | cut -c1-200)") ;;
    124) result="timed out after ${secs} s" ;;
    *) result="exit $rc: $(tail -1 "$log" | cut -c1-200)" ;;
  esac
  echo "| $model | $exporter | $dtype | $result | $err | $kernels | $library |" > "$d/row-$dtype.md"
  echo "$name $dtype: $result"
}
export -f run_one
for dir in "$models"/*/; do
  for dt in $(echo "$dtypes" | tr , ' '); do echo "$dir $dt"; done
done | KILN_RUN_FLAGS="$*" xargs -P "${KILN_MODEL_JOBS:-4}" -L1 bash -c 'run_one "$0" "$1" $KILN_RUN_FLAGS'
cat "$models"/*/row-*.md >> "$report"
tar -czf "$out/models-logs.tar.gz" -C "$models" $(cd "$models" && ls -d */run-*.log */EXPORT_FAILED 2>/dev/null) 2>/dev/null
cat "$report"

#!/usr/bin/env bash
# Writes bench/results/optimizer.md: nodes by op after every pass run, and optimizer time, for each
# ONNX model given (default: every model.onnx under the models dir made by scripts/gen_models.py).
#   usage: scripts/optimizer_report.sh [BUILD_DIR] [MODEL.onnx...]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}; shift || true
models=("$@")
if [ ${#models[@]} -eq 0 ]; then mapfile -t models < <(find "${KILN_MODELS_DIR:-.cache/models}" -name model.onnx | sort); fi
[ ${#models[@]} -gt 0 ] || { echo "no models: run scripts/gen_models.py or pass .onnx paths" >&2; exit 1; }
out=bench/results/optimizer.md
{
  echo "# Graph optimizer: node counts by op per pass, and time"
  echo
  echo "Date: $(date -u +%Y-%m-%d). Machine: $(uname -m), $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)."
  echo "Command: \`scripts/optimizer_report.sh $build ${models[*]}\` (kiln-opt --no-verify-each --stats: default pipeline, primitives-only target; models specialised to the shapes of their saved inputs)."
  echo
  for m in "${models[@]}"; do
    [ -f "$m" ] || continue
    name=$(basename "$(dirname "$m")")
    # Models whose shape sub-graphs need concrete sizes (MiniLM's Slice ends) are specialised to the
    # shapes of the inputs saved beside them (input_<i>.npy), as the model tests do.
    shapes=()
    if [ -f "$(dirname "$m")/input_0.npy" ] && [ -x .venv/bin/python ]; then
      mapfile -t shapes < <(.venv/bin/python - "$m" <<'PY'
import sys, pathlib, numpy, onnx
model = onnx.load(sys.argv[1], load_external_data=False)
inits = {i.name for i in model.graph.initializer}
names = [i.name for i in model.graph.input if i.name not in inits]
for k, n in enumerate(names):
    f = pathlib.Path(sys.argv[1]).parent / f"input_{k}.npy"
    if f.exists():
        print(f"--input-shape={n}:" + ",".join(str(d) for d in numpy.load(f, mmap_mode="r").shape))
PY
)
    fi
    "$build/kiln-opt" --no-verify-each --stats --stats-title="$name" "${shapes[@]}" "$m" 2>&1 >/dev/null || true
    echo
  done
} > "$out"
echo "wrote $out"

#!/usr/bin/env bash
# The CPU benchmark in one command: Kiln eager + compiled (kiln_cpu_bench), then PyTorch eager,
# torch.compile and ONNX Runtime (bench/cpu_peers.py) on the same workloads, 2 threads pinned to 2
# cores, merged into bench/results/cpu-<date>.md (bench/cpu_report.py) with machine and command.
# Needs: a build with kiln_cpu_bench (KILN_BUILD_DIR, default build) and .venv with torch,
# torchvision, onnxruntime (scripts/install-deps; KILN_INSTALL_MODELS for the ONNX models).
# Usage: bench/run_cpu.sh [--quick] [--only SUBSTR] [--build DIR] [--out FILE]
#   --quick: 2 repeats (a smoke test of the harness, not a measurement).
# glibc's malloc is told to keep large blocks (no fresh mmap per output): otherwise every run pays
# first-touch page faults on its outputs, which costs more than the kernels on the 32M chains.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${KILN_BUILD_DIR:-build} repeats=${KILN_BENCH_REPEATS:-7} only="" out="" cmdline="bench/run_cpu.sh $*"
while [ $# -gt 0 ]; do
  case $1 in
    --quick) repeats=2 ;;
    --only) only=$2; shift ;;
    --build) build=$2; shift ;;
    --out) out=$2; shift ;;
    *) echo "usage: bench/run_cpu.sh [--quick] [--only SUBSTR] [--build DIR] [--out FILE]" >&2; exit 2 ;;
  esac
  shift
done
out=${out:-bench/results/cpu-$(date -u +%F).md}
py=python3
[ -x .venv/bin/python ] && py=.venv/bin/python
[ -x "$build/kiln_cpu_bench" ] || { echo "no $build/kiln_cpu_bench: KILN_BUILD_DIR=$build scripts/build kiln_cpu_bench" >&2; exit 1; }
export MALLOC_MMAP_THRESHOLD_=2147483647 MALLOC_TRIM_THRESHOLD_=4294967295 OMP_NUM_THREADS=2
pin="taskset -c 0,1"
command -v taskset >/dev/null || pin=""

# ResNet-18 and MiniLM-L6 come from scripts/gen_models.py (skipped with a note when it cannot run).
if [ ! -f .cache/models/resnet18/model.onnx ] || [ ! -f .cache/models/minilm_l6/model.onnx ]; then
  HF_HUB_OFFLINE=1 "$py" scripts/gen_models.py --only resnet18,minilm_l6 >&2 || echo "gen_models.py failed: ONNX models skipped" >&2
fi
# OpenBLAS picks its kernels by CPU model; on a model it does not know (a newer Xeon) it falls back
# to Prescott (SSE3) kernels, several times slower. Force the best family the CPU supports then.
core=$("$build/kiln_cpu_bench" --blas-core 2>/dev/null || echo "?")
case $core in
  Prescott|Core2|Penryn|Dunnington|Nehalem|Atom|Katmai|Coppermine|Northwood|Banias|Unknown)
    if grep -qw avx512f /proc/cpuinfo; then export OPENBLAS_CORETYPE=SkylakeX
    elif grep -qw avx2 /proc/cpuinfo; then export OPENBLAS_CORETYPE=Haswell; fi
    echo "OpenBLAS chose '$core' kernels on this CPU; forcing OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-unchanged}" >&2 ;;
esac
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
only_args=()
[ -n "$only" ] && only_args=(--only "$only")
$pin "$build/kiln_cpu_bench" --threads 2 --repeats "$repeats" --json "$tmp/kiln.json" "${only_args[@]}" >&2
$pin "$py" bench/cpu_peers.py --threads 2 --repeats "$repeats" --json "$tmp/peers.json" "${only_args[@]}" >&2 \
  || echo "cpu_peers.py failed: peer columns will say n/a" >&2
note="OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-auto} (OpenBLAS detected: $core)"
[ "$repeats" = 2 ] && note="$note. QUICK RUN (2 repeats): a harness smoke test, not a measurement"
mkdir -p "$(dirname "$out")"
"$py" bench/cpu_report.py --kiln "$tmp/kiln.json" --peers "$tmp/peers.json" --out "$out" \
  --command "$cmdline (KILN_BUILD_DIR=$build)" --note "$note" >/dev/null
echo "wrote $out" >&2

#!/usr/bin/env bash
# Runs on the GPU machine: kiln-gpu-bench from two bundles in one call, alternating (new, old, new,
# old, ...), each run's JSON into $OUT as new-N.json / old-N.json. Why: a change that must not move
# the GPU figures (a refactor) is judged against the build before it on the same machine, in the
# same call; bench/gpu_compare.py turns the files into a table of medians and ratios.
#   usage: bash scripts/gpu-compare.sh [ROUNDS] [kiln-gpu-bench args...]
#   needs: .gpu/ (scripts/gpu-run on this change) and .gpu-old/ (scripts/gpu-run on the base), both carried
set -u
cd "$(dirname "$0")/.."
out=${OUT:-gpu-results}
mkdir -p "$out"
rounds=${1:-2}
shift || true
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export KILN_CACHE_DIR=${KILN_CACHE_DIR:-/tmp/kiln-gpu-cache}
for b in .gpu .gpu-old; do
  if [ -f $b/gpu-bundle.tar.xz ]; then tar -xJf $b/gpu-bundle.tar.xz -C $b && rm $b/gpu-bundle.tar.xz; fi
  [ -x $b/kiln-gpu-bench ] || { echo "gpu-compare: $b/kiln-gpu-bench is missing" >&2; exit 2; }
done
rc=0
for i in $(seq 1 "$rounds"); do
  for side in new old; do
    dir=.gpu; [ $side = old ] && dir=.gpu-old
    KILN_CACHE_DIR=$KILN_CACHE_DIR-$side $dir/kiln-gpu-bench --json "$out/$side-$i.json" "$@" > "/tmp/bench-$side-$i.log" 2>&1
    status=$?
    [ $status = 0 ] || { rc=1; tail -5 "/tmp/bench-$side-$i.log"; }
    echo "$side round $i: exit $status"
  done
done
exit $rc

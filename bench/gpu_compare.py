#!/usr/bin/env python3
"""Two builds' kiln-gpu-bench runs from one device call, side by side: the median of each timed
field over the runs of each build, and new/old. Why: a change that should not move the GPU figures
(a refactor) is checked against the build before it on the same machine in the same call, as
ratios, not against numbers from another day.

  usage: gpu_compare.py OUT.md "COMMAND" --old A.json [B.json ...] --new C.json [D.json ...]
"""
import json
import statistics
import sys
from datetime import date

TIMED = ("ms", "us", "_ms", "_us")  # fields that are times (lower is better)


def runs(paths):
    out = []
    for p in paths:
        with open(p) as f:
            out.append(json.load(f))
    return out


def fields(results):
    """workload -> field -> [values over runs]"""
    table = {}
    for r in results:
        for name, value in r.items():
            if not isinstance(value, dict):
                continue
            for k, v in value.items():
                if isinstance(v, (int, float)) and not isinstance(v, bool) and (k.endswith(TIMED) or k == "TBps"):
                    table.setdefault(name, {}).setdefault(k, []).append(float(v))
    return table


def main(argv):
    if len(argv) < 5 or "--old" not in argv or "--new" not in argv:
        sys.exit(__doc__)
    out, command = argv[1], argv[2]
    i_old, i_new = argv.index("--old"), argv.index("--new")
    old = fields(runs(argv[i_old + 1:i_new]))
    new = fields(runs(argv[i_new + 1:]))
    lines = [f"| workload | field | before (median of {len(argv[i_old + 1:i_new])}) | after (median of {len(argv[i_new + 1:])}) | after/before |",
             "|---|---|---|---|---|"]
    worst = []
    for name in sorted(set(old) | set(new)):
        for k in sorted(set(old.get(name, {})) | set(new.get(name, {}))):
            a, b = old.get(name, {}).get(k), new.get(name, {}).get(k)
            if not a or not b:
                lines.append(f"| {name} | {k} | {statistics.median(a) if a else '-'} | {statistics.median(b) if b else '-'} | (one side only) |")
                continue
            ma, mb = statistics.median(a), statistics.median(b)
            ratio = mb / ma if ma else float("nan")
            worst.append((abs(ratio - 1), name, k, ratio))
            lines.append(f"| {name} | {k} | {ma:.4g} | {mb:.4g} | {ratio:.3f} |")
    worst.sort(reverse=True)
    with open(out, "w") as f:
        f.write(f"# kiln-gpu-bench before and after, one device call\n\nDate: {date.today()}. Command: `{command}`.\n"
                "Medians over the runs of each build (the builds alternate); for TBps higher is better, for times lower.\n\n")
        if worst:
            f.write("Largest differences: " + "; ".join(f"{n} {k} {r:.3f}" for _, n, k, r in worst[:5]) + ".\n\n")
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main(sys.argv)

#!/usr/bin/env python3
"""End-to-end tests of the `kiln` command line (CTest label `cli`): every subcommand on the built-in
model and on a small ONNX model, JSON outputs checked against the fields documented in docs/cli.md,
the trace file parsed, the AOT round trip compared with the JIT, and bad input rejected clearly.

Usage: cli_test.py KILN_BINARY TEST_NAME   (one CTest entry per test name; see CMakeLists.txt)
"""
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile

KILN = sys.argv[1]
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ONNX_MODEL = os.path.join(ROOT, ".venv/lib/python3.11/site-packages/onnx/backend/test/data/node/"
                          "test_gemm_default_matrix_bias/model.onnx")
TMP = tempfile.mkdtemp(prefix="kiln-cli-test-")


def kiln(*args, ok=True, env=None):
    full_env = dict(os.environ, **(env or {}))
    p = subprocess.run([KILN, *args], capture_output=True, text=True, env=full_env, timeout=280)
    if ok and p.returncode != 0:
        sys.exit(f"FAIL: kiln {' '.join(args)} exited {p.returncode}\nstdout:\n{p.stdout}\nstderr:\n{p.stderr}")
    return p


def expect(cond, what):
    if not cond:
        sys.exit(f"FAIL: {what}")


def has_fields(obj, fields, where):
    for f, kind in fields.items():
        expect(f in obj, f"{where}: missing field '{f}' in {sorted(obj)}")
        expect(isinstance(obj[f], kind), f"{where}.{f}: expected {kind}, got {type(obj[f]).__name__}")


NUM = (int, float)


def read_npy(path):
    with open(path, "rb") as f:
        data = f.read()
    expect(data[:6] == b"\x93NUMPY", f"{path} is not .npy")
    hlen = struct.unpack("<H", data[8:10])[0]
    header = data[10:10 + hlen].decode()
    expect("'<f4'" in header, f"{path}: expected float32, header {header}")
    body = data[10 + hlen:]
    return struct.unpack(f"<{len(body) // 4}f", body)


def need_onnx():
    expect(os.path.exists(ONNX_MODEL), f"ONNX test model missing: {ONNX_MODEL} (bash scripts/install-deps)")


# ---- tests ----

def test_help():
    kiln("--help")
    for cmd in ["run", "compile", "explain", "gap", "calibrate", "dump", "ops"]:
        out = kiln(cmd, "--help").stdout
        expect("Usage" in out or "usage" in out.lower(), f"kiln {cmd} --help prints no usage")


def test_ops():
    # docs/ops-support.md is `kiln ops --markdown`: regenerate it when an op table changes.
    doc = os.path.join(ROOT, "docs", "ops-support.md")
    with open(doc) as f:
        expect(f.read() == kiln("ops", "--markdown").stdout,
               "docs/ops-support.md is stale: run `build/kiln ops --markdown > docs/ops-support.md`")
    cuda = kiln("ops", "--target", "cuda").stdout
    expect("matmul  library: cuBLASLt" in cuda and "gather  library: CUDA library kernel" in cuda
           and "sequence_at  host: the interpreter" in cuda, f"kiln ops --target cuda: {cuda[:400]}")
    both = kiln("ops").stdout
    expect("\n  cpu: " in both and "\n  cuda: " in both, "kiln ops lists both targets")
    bad = kiln("ops", "--target", "tpu", ok=False)
    expect(bad.returncode != 0 and "tpu" in bad.stderr, f"kiln ops --target tpu: {bad.stderr}")


def test_calibrate():
    c = json.loads(kiln("calibrate", "--quick", "--force", "--json").stdout)
    has_fields(c, {"copy_gbps": NUM, "gemm_gflops": NUM, "launch_us": NUM, "run_overhead_us": NUM, "threads": int,
                   "copy_bytes": int, "gemm_n": int, "quick": bool, "measured_at": str, "format_version": int}, "ceilings")
    expect(c["copy_gbps"] > 0 and c["gemm_gflops"] > 0 and c["launch_us"] > 0, f"non-positive ceilings {c}")
    again = json.loads(kiln("calibrate", "--json").stdout)  # cached: identical
    expect(again == c, "the second calibrate did not read the cache")
    text = kiln("calibrate").stdout
    expect("cached" in text and "GB/s" in text, f"calibrate text: {text}")


def check_explain_json(r, min_kernels):
    has_fields(r, {"model": str, "repeats": int, "ceilings": dict, "kernels": list, "fusion": dict, "summary": dict}, "explain")
    expect(len(r["kernels"]) >= min_kernels, f"only {len(r['kernels'])} kernels")
    for k in r["kernels"]:
        has_fields(k, {"index": int, "name": str, "library": bool, "source_ops": list, "bytes_read": int,
                       "bytes_written": int, "flops": NUM, "arithmetic_intensity": NUM, "time_us": NUM,
                       "bounds_us": dict, "bound_us": NUM, "regime": str, "percent_of_ceiling": NUM}, "kernel")
        expect(k["regime"] in ("launch", "bandwidth", "compute"), f"regime {k['regime']}")
        expect(abs(k["bound_us"] - max(k["bounds_us"].values())) < 1e-9 * max(1, k["bound_us"]), f"bound {k}")
        expect(k["source_ops"], f"kernel {k['name']} has no source ops")
    has_fields(r["fusion"], {"decisions": list, "decomposition_notes": list}, "fusion")
    for d in r["fusion"]["decisions"]:
        has_fields(d, {"node": str, "op": str, "action": str, "group": int, "reason": str, "refusals": list}, "decision")
    has_fields(r["summary"], {"kernels": int, "generated_kernels": int, "library_calls": int, "run_us": NUM,
                              "kernel_us": NUM, "dispatch_us": NUM, "bound_us": NUM, "percent_of_roofline": NUM,
                              "time_by_regime_us": dict}, "summary")
    expect(r["summary"]["kernels"] == len(r["kernels"]), "summary.kernels != len(kernels)")


def test_explain():
    html = os.path.join(TMP, "explain.html")
    r = json.loads(kiln("explain", "--json", "--repeats", "2", "--html", html).stdout)
    check_explain_json(r, 5)
    expect(r["summary"]["library_calls"] >= 2, "the transformer block has matmuls (library calls)")
    expect(any(d["action"].startswith("joins group") for d in r["fusion"]["decisions"]), "no fusion happened")
    expect(any(d["refusals"] for d in r["fusion"]["decisions"]), "no refusal recorded")
    page = open(html).read()
    expect(page.startswith("<!doctype html>") and "<svg" in page and "class=\"bar" in page, "html lacks graph or bars")
    expect("src=" not in page and "href=\"http" not in page, "html is not self-contained")
    text = kiln("explain", "--repeats", "2").stdout
    for needle in ["fusion decisions:", "where the time goes", "roofline", "regime"]:
        expect(needle in text, f"explain text lacks '{needle}'")


def test_explain_onnx():
    need_onnx()
    r = json.loads(kiln("explain", ONNX_MODEL, "--json", "--repeats", "2").stdout)
    check_explain_json(r, 1)
    expect(any("matmul" in " ".join(k["source_ops"]) for k in r["kernels"]), "gemm became no matmul kernel")


def run_artefact(out_dir, *extra, ok=True):
    # A compiler that does not exist: loading must not need one.
    return kiln("run", out_dir, *extra, ok=ok, env={"CXX": "/nonexistent/kiln-no-compiler"})


def test_compile_run():
    out = os.path.join(TMP, "block.kiln")
    text = kiln("compile", "-o", out).stdout
    expect("kernels.so" in text, text)
    m = json.load(open(os.path.join(out, "manifest.json")))
    has_fields(m, {"format": str, "format_version": int, "model": str, "inputs": list, "outputs": list,
                   "cache_key": str, "source_hash": str, "compiler": dict, "compile_options": dict, "files": dict}, "manifest")
    expect(m["inputs"][0]["shape"] == ["B", "T", 64], f"symbolic dims lost: {m['inputs']}")
    has_fields(m["compiler"], {"identity": str, "flags": list}, "manifest.compiler")
    p = run_artefact(out, "--dim", "B=2", "--dim", "T=5", "--check")
    expect("no compiler run" in p.stdout and "f32[2, 5, 64]" in p.stdout, p.stdout)
    # A corrupt shared object is refused by name.
    so = os.path.join(out, "kernels.so")
    data = bytearray(open(so, "rb").read())
    data[200] ^= 0xFF
    open(so, "wb").write(bytes(data))
    p = run_artefact(out, ok=False)
    expect(p.returncode != 0 and "kernels.so is corrupt" in p.stderr, f"corrupt .so: {p.returncode} {p.stderr}")


def test_compile_run_onnx():
    need_onnx()
    out = os.path.join(TMP, "gemm.kiln")
    kiln("compile", ONNX_MODEL, "-o", out)
    jit_dir, aot_dir = os.path.join(TMP, "jit"), os.path.join(TMP, "aot")
    kiln("run", ONNX_MODEL, "--save", jit_dir, "--seed", "5")
    run_artefact(out, "--save", aot_dir, "--seed", "5", "--check")
    names = sorted(os.listdir(jit_dir))
    expect(names and names == sorted(os.listdir(aot_dir)), f"outputs differ: {names} vs {os.listdir(aot_dir)}")
    for n in names:
        a, b = read_npy(os.path.join(jit_dir, n)), read_npy(os.path.join(aot_dir, n))
        expect(a == b, f"{n}: the AOT artefact's output differs from the JIT's")


def test_check_tolerance():
    # --expect compares with the given tolerances (--atol/--rtol reach the model path), by default
    # those of the output's dtype (f32 here: 1e-4 + 1e-3 relative).
    need_onnx()
    saved = os.path.join(TMP, "want")
    kiln("run", ONNX_MODEL, "--save", saved, "--seed", "3")
    name = sorted(os.listdir(saved))[0]
    path = os.path.join(saved, name)
    data = bytearray(open(path, "rb").read())
    hlen = struct.unpack("<H", data[8:10])[0]
    first = 10 + hlen
    value = struct.unpack("<f", data[first:first + 4])[0]
    data[first:first + 4] = struct.pack("<f", value + 0.05)  # one element off by 0.05
    open(path, "wb").write(bytes(data))
    expect_arg = f"{name[:-4]}={path}"
    p = kiln("run", ONNX_MODEL, "--seed", "3", "--expect", expect_arg, ok=False)
    expect(p.returncode != 0 and "OUT OF TOLERANCE" in p.stdout, f"a 0.05 error passed the default f32 tolerance:\n{p.stdout}")
    p = kiln("run", ONNX_MODEL, "--seed", "3", "--expect", expect_arg, "--atol", "0.1")
    expect("within tolerance" in p.stdout, f"--atol 0.1 was not applied:\n{p.stdout}")


def test_gap():
    svg, trace = os.path.join(TMP, "gap.svg"), os.path.join(TMP, "gap-trace.json")
    r = json.loads(kiln("gap", "--chain", "1,2,4", "--size", "1MB", "--repeats", "2", "--json", "--svg", svg,
                        "--profile", trace).stdout)
    has_fields(r, {"device": str, "tensor_bytes": int, "repeats": int, "copy_gbps": NUM, "rows": list}, "gap")
    expect([row["chain"] for row in r["rows"]] == [1, 2, 4], "chain lengths")
    for row in r["rows"]:
        has_fields(row, {"chain": int, "eager": dict, "compiled": dict, "speedup": NUM}, "row")
        for side in ("eager", "compiled"):
            has_fields(row[side], {"kernels": int, "bytes_moved": int, "time_us": NUM, "gbps": NUM,
                                   "percent_of_copy": NUM}, side)
        expect(row["eager"]["kernels"] == row["chain"], f"eager kernels {row}")
        expect(row["compiled"]["kernels"] == 1, f"compiled chain is not one kernel: {row}")
        # One read and one write of the tensor (plus at most the scalars' bytes).
        expect(0 <= row["compiled"]["bytes_moved"] - 2 * r["tensor_bytes"] <= 8 * row["chain"], f"compiled bytes {row}")
        expect(row["eager"]["bytes_moved"] >= 2 * row["chain"] * r["tensor_bytes"], f"eager bytes {row}")
    body = open(svg).read()
    expect(body.startswith("<svg") and body.rstrip().endswith("</svg>") and "<rect" in body, "bad svg")
    events = json.load(open(trace))["traceEvents"]
    expect(any(e.get("cat") == "kernel" and e["name"].startswith("fused") for e in events), "no fused kernel slices")
    text = kiln("gap", "--chain", "2", "--size", "64KiB", "--repeats", "1").stdout
    expect("speedup" in text and "eager" in text, text)


def check_dump(d):
    for f in ["00-input.kir", "graph.dot", "optimized.kir", "lowered.kir", "loop_ir.txt", "kernels.cc", "kernels.cu",
              "explain.txt", "fused.dot", "passes.txt", "program.txt", "program-cuda.txt"]:
        expect(os.path.getsize(os.path.join(d, f)) > 0, f"dump: {f} empty")
    for f in ["program.txt", "program-cuda.txt"]:  # the program-level IR: steps over planned buffers
        prog = open(os.path.join(d, f)).read()
        expect(prog.startswith("program ") and "\nsteps:\n" in prog and re.search(r"\n  0  (kernel|library|host) ", prog),
               f"dump: {f} is not a program listing: {prog[:300]}")
    expect(any(n.endswith(".kir") for n in os.listdir(os.path.join(d, "passes"))), "no per-pass IR")
    dot = open(os.path.join(d, "fused.dot")).read()
    expect(dot.startswith("digraph") and "cluster_g0" in dot and "fillcolor" in dot, "fused.dot has no groups")
    cu = open(os.path.join(d, "kernels.cu")).read()
    expect("__global__" in cu and not re.search(r"(?<![A-Za-z_])std::", cu), "kernels.cu is not CUDA for NVRTC")


def test_dump():
    d = os.path.join(TMP, "dump")
    kiln("dump", "--dir", d)
    check_dump(d)
    expect("cluster_g1" in open(os.path.join(d, "fused.dot")).read(), "the block has several kernels")
    # --sm90: the kernels as compile_cuda writes them for an H100/H200 (clusters, 226 KiB staging).
    d90 = os.path.join(TMP, "dump-sm90")
    kiln("dump", "--dir", d90, "--sm90")
    check_dump(d90)


def test_dump_onnx():
    need_onnx()
    d = os.path.join(TMP, "dump-onnx")
    kiln("dump", ONNX_MODEL, "--dir", d)
    check_dump(d)
    # Gather runs on the GPU as a library kernel: the CUDA program lists it as a library step.
    gather = os.path.join(os.path.dirname(os.path.dirname(ONNX_MODEL)), "test_gather_0", "model.onnx")
    dg = os.path.join(TMP, "dump-gather")
    kiln("dump", gather, "--dir", dg)
    prog = open(os.path.join(dg, "program-cuda.txt")).read()
    expect(prog.startswith("program ") and re.search(r"library +gather", prog), f"program-cuda.txt: {prog[:400]}")
    # A model the GPU cannot run (control flow) is still dumped; the CUDA program says why not.
    cond = os.path.join(os.path.dirname(os.path.dirname(ONNX_MODEL)), "test_if", "model.onnx")
    di = os.path.join(TMP, "dump-if")
    kiln("dump", cond, "--dir", di)
    prog = open(os.path.join(di, "program-cuda.txt")).read()
    expect(prog.startswith("compile_cuda refuses this graph:") and "control flow" in prog, f"program-cuda.txt: {prog[:300]}")


def test_profile():
    need_onnx()
    t = os.path.join(TMP, "trace.json")
    kiln("run", ONNX_MODEL, "--profile", t)
    events = json.load(open(t))["traceEvents"]
    names = {e["name"] for e in events if e.get("cat") == "phase"}
    for phase in ["import", "optimize", "lower", "run"]:
        expect(phase in names, f"trace lacks phase '{phase}': {names}")
    expect(any(n.startswith("compile") for n in names), f"no compile phase: {names}")
    kernels = [e for e in events if e.get("cat") == "kernel"]
    expect(kernels and all(e["ph"] == "X" and e["dur"] >= 0 and "bytes_read" in e["args"] for e in kernels), "kernels")
    kiln("run", "--profile", t)  # the built-in demo
    events = json.load(open(t))["traceEvents"]
    expect(len([e for e in events if e.get("cat") == "kernel"]) >= 5, "demo trace has few kernels")


def test_errors():
    bad_file = os.path.join(TMP, "not-a-model.onnx")
    open(bad_file, "w").write("this is not protobuf")
    cases = [
        (["gap", "--size", "12XB"], "unknown unit"),
        (["gap", "--chain", "1,zero"], "--chain"),
        (["explain", os.path.join(TMP, "missing.onnx")], "no such model file"),
        (["explain", bad_file], "not-a-model.onnx"),
        (["run", "--device", "tpu"], "tpu"),
        (["run", "--cuda-depthwise"], "--cuda-depthwise needs --device cuda"),
        (["compile"], "--output"),
        (["dump"], "--dir"),
        (["nonsense"], "nonsense"),
        (["run", TMP + "/no-such-dir/model.onnx"], "model.onnx"),
    ]
    artefact = os.path.join(TMP, "fake.kiln")
    os.makedirs(artefact)
    open(os.path.join(artefact, "manifest.json"), "w").write('{"format": "kiln-compiled-artefact", "format_version": 99}')
    cases.append((["run", artefact], "format version 99"))
    # Without a usable GPU (or without the CUDA backend in this build) --device cuda must say why;
    # with one, the same commands succeed.
    for args in (["run", "--device", "cuda"], ["gap", "--device", "cuda", "--size", "1KB", "--chain", "1"]):
        p = kiln(*args, ok=False)
        if p.returncode != 0:
            expect("--device cuda" in p.stderr and ("CUDA" in p.stderr or "cuda" in p.stderr.split(":", 2)[-1]),
                   f"kiln {' '.join(args)}: stderr does not say why CUDA is unavailable:\n{p.stderr}")
    for args, needle in cases:
        p = kiln(*args, ok=False)
        expect(p.returncode != 0, f"kiln {' '.join(args)} exited 0")
        expect(needle in p.stderr, f"kiln {' '.join(args)}: stderr lacks '{needle}':\n{p.stderr}")
        expect(p.stdout.strip() == "" or "Usage" not in p.stdout, f"kiln {' '.join(args)}: error text on stdout")


if __name__ == "__main__":
    try:
        globals()["test_" + sys.argv[2]]()
        print(f"PASS {sys.argv[2]}")
    finally:
        shutil.rmtree(TMP, ignore_errors=True)

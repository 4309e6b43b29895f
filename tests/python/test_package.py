"""The package itself: imports without torch, ships its type stubs, registers the torch backend's
entry point, and its errors are the documented exception types."""
import importlib.metadata
import pathlib
import subprocess
import sys

import kiln


def test_import_without_torch_and_onnx_session_still_works(tmp_path):
    # torch made unimportable in a fresh interpreter: `import kiln` and kiln.load must not need it,
    # and kiln.compile of a function must say torch is missing.
    code = """
import sys
sys.modules['torch'] = None
import numpy as np, kiln
assert 'torch' not in [m for m in sys.modules if sys.modules[m] is not None]
g = kiln._kiln.Graph("t")
x = g.input("x", "f32", [3])
g.set_outputs([g.node("neg", [x])[0]])
y, = kiln._kiln.compile(g).run([np.array([1, -2, 3], np.float32)], ["f32"])
assert y[0].tolist() == [-1, 2, -3], y
try:
    kiln.compile(lambda t: t)
except kiln.Error as e:
    assert 'torch' in str(e), e
else:
    raise SystemExit('kiln.compile without torch did not raise')
print('ok')
"""
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "ok"


def test_type_stubs_are_installed():
    pkg = pathlib.Path(kiln._kiln.__file__).parent  # beside the extension (editable installs too)
    stub = (pkg / "_kiln.pyi").read_text()
    assert (pkg / "py.typed").exists()
    for name in ("class Graph", "class Executable", "def compile(", "def load_onnx(", "def interpret("):
        assert name in stub, name


def test_torch_dynamo_backend_entry_point():
    eps = importlib.metadata.entry_points(group="torch_dynamo_backends")
    kiln_eps = [e for e in eps if e.name == "kiln"]
    assert kiln_eps and kiln_eps[0].value == "kiln.torch_backend:kiln_backend"


def test_error_hierarchy():
    assert issubclass(kiln.UnsupportedOpError, kiln.Error)
    assert issubclass(kiln.Error, RuntimeError)

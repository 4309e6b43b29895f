"""kiln.load: an ONNX model compiled once, run like ONNX Runtime's InferenceSession.

Why: the shortest way from an .onnx file to Kiln's compiled kernels from Python, with the same
call shape people already use, and errors that name the input and dimension that is wrong.
"""
import json
import os
from dataclasses import dataclass

import numpy as np

from kiln import _kiln
from kiln._kiln import Error
from kiln import arrays


@dataclass(frozen=True)
class ValueInfo:
    """A model input or output: name, numpy dtype name, shape (ints; symbolic dims as strings)."""
    name: str
    dtype: str
    shape: list
    kiln_type: str  # Kiln's spelling: "f32[B, 4]"

    def __repr__(self):
        return f"ValueInfo(name={self.name!r}, dtype={self.dtype!r}, shape={self.shape!r})"


def _info(value):
    dims = value.shape
    type_text = f"{value.dtype}[{', '.join(str(d) for d in dims)}]"
    return ValueInfo(value.name, arrays.KILN_TO_NUMPY.get(value.dtype, value.dtype), list(dims), type_text)


class Session:
    """A compiled model. Build it with kiln.load()."""

    def __init__(self, graph, executable, path, device):
        self._graph = graph          # as imported (inputs and outputs named as in the file)
        self._exe = executable
        self.path = path
        self.device = device
        self.inputs = [_info(v) for v in graph.inputs]
        self.outputs = [_info(v) for v in graph.outputs]

    def get_inputs(self):  # ONNX Runtime's spelling
        return self.inputs

    def get_outputs(self):
        return self.outputs

    def _check_feeds(self, feeds):
        if not isinstance(feeds, dict):
            raise Error("run: feeds must be a dict {input name: array}")
        names = [i.name for i in self.inputs]
        for k in feeds:
            if k not in names:
                raise Error(f"unknown input '{k}'; the model's inputs are: {', '.join(names)}")
        converted, bound = [], {}
        for info in self.inputs:
            if info.name not in feeds:
                raise Error(f"missing input '{info.name}' ({info.kiln_type})")
            array, dtype = arrays.convert_in(feeds[info.name], f"input '{info.name}'")
            want = info.kiln_type.split("[")[0]
            if dtype != want:
                raise Error(f"input '{info.name}': expected {info.dtype} ({want}), got "
                            f"{arrays.KILN_TO_NUMPY.get(dtype, dtype)}")
            if array.ndim != len(info.shape):
                raise Error(f"input '{info.name}': expected rank {len(info.shape)} ({info.kiln_type}), "
                            f"got shape {tuple(array.shape)}")
            for axis, (want_dim, got) in enumerate(zip(info.shape, array.shape)):
                if isinstance(want_dim, int):
                    if want_dim != got:
                        raise Error(f"input '{info.name}' dimension {axis}: expected {want_dim}, got {got} "
                                    f"(shape {tuple(array.shape)}, model wants {info.kiln_type})")
                elif want_dim.isidentifier():
                    if want_dim in bound and bound[want_dim][0] != got:
                        size, other = bound[want_dim]
                        raise Error(f"input '{info.name}' dimension {axis} ('{want_dim}'): got {got}, but "
                                    f"input '{other}' gave {want_dim} = {size}")
                    bound.setdefault(want_dim, (got, info.name))
            converted.append((array, dtype))
        return converted

    def run(self, output_names=None, feeds=None, *, run_options=None):
        """Runs the model: `output_names` (None: all, in order) from `feeds` {input name: array}.
        numpy in -> numpy out; torch tensors in -> torch tensors out. Inputs are read in place."""
        feeds = feeds or {}
        torch_out = any(arrays.is_torch_tensor(v) for v in feeds.values())
        converted = self._check_feeds(feeds)
        outs = self._exe.run([a for a, _ in converted], [d for _, d in converted])
        by_name = {}
        for info, (array, dtype) in zip(self.outputs, outs):
            by_name[info.name] = arrays.to_torch(array, dtype) if torch_out else arrays.to_numpy(array, dtype)
        if output_names is None:
            return [by_name[o.name] for o in self.outputs]
        for n in output_names:
            if n not in by_name:
                raise Error(f"unknown output '{n}'; the model's outputs are: {', '.join(by_name)}")
        return [by_name[n] for n in output_names]

    def random_feeds(self, dims=None, seed=0):
        """Seeded random inputs (floats in [-1, 1), integers in [0, 10)); symbolic dims from `dims`
        (default 1)."""
        dims = dims or {}
        rng = np.random.default_rng(seed)
        feeds = {}
        for info in self.inputs:
            shape = []
            for d in info.shape:
                if isinstance(d, int):
                    shape.append(d)
                elif d in dims:
                    shape.append(int(dims[d]))
                else:
                    shape.append(1)
            if info.dtype.startswith("float"):
                feeds[info.name] = rng.uniform(-1, 1, shape).astype(info.dtype)
            elif info.dtype == "bool":
                feeds[info.name] = rng.integers(0, 2, shape).astype(bool)
            else:
                feeds[info.name] = rng.integers(0, 10, shape).astype(info.dtype)
        return feeds

    def explain(self, feeds=None, *, format="text", repeats=5, dims=None):
        """`kiln explain`'s report: per kernel its source ops, bytes, FLOPs, measured time and roofline
        bound, every fusion decision. format="dict" gives its JSON fields (docs/cli.md); "fusion"
        gives the compiler's own report (decisions, Loop IR, generated source, memory plan)."""
        if format == "fusion":
            return self._exe.explain()
        if self.device != "cpu":
            raise Error(f"explain measures CPU sessions only (this one runs on {self.device})")
        feeds = feeds if feeds is not None else self.random_feeds(dims)
        converted = self._check_feeds(feeds)
        text, js = self._exe.explain_report(os.path.basename(self.path), [a for a, _ in converted],
                                            [d for _, d in converted], repeats)
        if format == "dict":
            return json.loads(js)
        if format != "text":
            raise Error(f"explain: format must be 'text', 'dict' or 'fusion', not {format!r}")
        return text

    @property
    def stats(self):
        """How compiling went: kernels generated, library calls, cache hit, times (ms), cache key."""
        return self._exe.stats

    def save(self, directory):
        """Writes `kiln compile`'s artefact: `kiln run DIR` and kiln::load_compiled load it without Python."""
        self._exe.save(str(directory))


def load(path, device="cpu", *, dims=None, threads=0, optimize=True, cache_dir=""):
    """Imports an ONNX model (or a `kiln compile` artefact directory, or a .kir text-IR file) and
    compiles it for `device` ("cpu" or "cuda"). Symbolic dims stay symbolic unless `dims` fixes them
    ({"batch": 8}): one compile serves every size. Raises kiln.Error naming the file, node and op."""
    path = os.fspath(path)
    if not os.path.exists(path):
        raise Error(f"{path}: no such file or directory")
    if os.path.isdir(path):
        if not os.path.exists(os.path.join(path, "manifest.json")):
            raise Error(f"{path}: a directory without manifest.json is not a `kiln compile` artefact")
        if device != "cpu":
            raise Error(f"{path}: artefacts are CPU code; load it with device='cpu'")
        exe = _kiln.load_compiled(path, threads)
        return Session(exe.graph, exe, path, "cpu")
    if path.endswith(".kir"):
        with open(path) as f:
            graph = _kiln.Graph.parse(f.read())
    else:
        graph = _kiln.load_onnx(path, dict(dims or {}))
    exe = _kiln.compile(graph, device, threads, optimize, cache_dir)
    return Session(graph, exe, path, device)

"""FX ATen graph -> Kiln Graph IR, built node by node through the extension's op table.

Why: one driver walks the nodes in order and asks the registry (ops_*.py) for each ATen op's Kiln
form; the registry also answers "can Kiln take this node?" for the partitioner, so what is
partitioned and what is lowered never disagree.
"""
import operator

import numpy as np
import torch

from kiln import _kiln
from kiln.arrays import KILN_TO_NUMPY, TORCH_TO_KILN
from kiln.torch_backend import symbolic
from kiln.torch_backend.errors import LoweringError


class Lowering:
    """One registry entry: fn(ctx, node) -> Value or list of Values; check(node) -> reason or None;
    outputs: for ops returning tuples, the tuple indices Kiln can produce."""

    def __init__(self, fn, check=None, outputs=None):
        self.fn, self.check, self.outputs = fn, check, outputs


LOWERINGS = {}


def lowers(*targets, check=None, outputs=None):
    def register(fn):
        for t in targets:
            LOWERINGS[t] = Lowering(fn, check, outputs)
        return fn
    return register


def meta_val(x):
    return x.meta.get("val") if isinstance(x, torch.fx.Node) else x


def kiln_dtype(torch_dtype):
    d = TORCH_TO_KILN.get(str(torch_dtype))
    if d is None:
        raise LoweringError(f"dtype {torch_dtype} has no Kiln dtype")
    return d


def _tensor_metas(node):
    """Fake tensors among a node's operands and results."""
    out = []
    for a in list(node.args) + list(node.kwargs.values()):
        for x in (a if isinstance(a, (list, tuple)) else [a]):
            v = meta_val(x) if isinstance(x, torch.fx.Node) else None
            if isinstance(v, torch.Tensor):
                out.append(v)
    v = node.meta.get("val")
    for x in (v if isinstance(v, (list, tuple)) else [v]):
        if isinstance(x, torch.Tensor):
            out.append(x)
    return out


def support_reason(node):
    """None when Kiln can lower `node` (an FX call_function), else why not."""
    if node.op != "call_function":
        return f"{node.op} nodes run in torch"
    if node.target is operator.getitem:
        src, index = node.args
        if not isinstance(src, torch.fx.Node) or src.op != "call_function":
            return "getitem of a value Kiln does not produce"
        entry = LOWERINGS.get(src.target)
        if entry is None or entry.outputs is None or (entry.outputs != "all" and index not in entry.outputs):
            return f"result {index} of {src.target} has no Kiln form"
        return support_reason(src)
    entry = LOWERINGS.get(node.target)
    if entry is None:
        return f"no Kiln lowering for ATen op {node.target}"
    if "val" not in node.meta:
        return "no shape information (meta['val']) on the node"
    for t in _tensor_metas(node):
        if str(t.dtype) not in TORCH_TO_KILN:
            return f"dtype {t.dtype} has no Kiln dtype"
        if t.device.type not in ("cpu", "cuda"):
            return f"device {t.device}"
        for d in t.shape:
            try:
                symbolic.dim(d)
            except LoweringError as e:
                return str(e)
    if entry.outputs is not None:
        for user in node.users:
            if user.target is not operator.getitem:
                return f"{node.target}'s tuple is used whole"
            if entry.outputs != "all" and user.args[1] not in entry.outputs:
                return f"result {user.args[1]} of {node.target} has no Kiln form"
    if entry.check is not None:
        try:
            reason = entry.check(node)
        except LoweringError as e:
            reason = str(e)
        if reason:
            return reason
    return None


class LoweringContext:
    """The Kiln graph being built and the FX node -> Kiln value map; helpers for the op lowerings."""

    def __init__(self, name):
        self.g = _kiln.Graph(name)
        self.env = {}
        self.node = None  # the FX node being lowered (for messages)

    # --- values ---
    def v(self, x):
        """The Kiln value of an FX node (a tensor operand)."""
        if isinstance(x, torch.fx.Node):
            if x not in self.env:
                raise LoweringError(f"operand {x.name} was not lowered")
            out = self.env[x]
            if isinstance(out, (list, tuple)):
                raise LoweringError(f"operand {x.name} is a tuple")
            return out
        raise LoweringError(f"expected a tensor operand, got {x!r}")

    def is_tensor(self, x):
        return isinstance(x, torch.fx.Node) and isinstance(meta_val(x), torch.Tensor)

    def dim(self, d):
        """A size argument (int, SymInt, or an FX node computing a SymInt) as a Kiln dim."""
        if isinstance(d, torch.fx.Node):
            d = meta_val(d)
        return symbolic.dim(d)

    def shape_of_meta(self, x):
        return [self.dim(d) for d in meta_val(x).shape]

    def out_meta(self):
        return self.node.meta["val"]

    def out_dtype(self, index=None):
        m = self.out_meta()
        if index is not None:
            m = m[index]
        return kiln_dtype(m.dtype)

    def out_shape(self, index=None):
        m = self.out_meta()
        if index is not None:
            m = m[index]
        return [self.dim(d) for d in m.shape]

    # --- building ---
    def op(self, name, inputs, **attrs):
        return self.g.node(name, list(inputs), attrs, self.node.name if self.node is not None else "")[0]

    def op_multi(self, name, inputs, **attrs):
        return self.g.node(name, list(inputs), attrs, self.node.name if self.node is not None else "")

    def cast(self, value, dtype):
        return value if value.dtype == dtype else self.op("cast", [value], dtype=dtype)

    def constant(self, array, dtype):
        if dtype == "bf16":
            return self.cast(self.g.constant(np.asarray(array, dtype=np.float32, order="C"), "f32"), "bf16")
        return self.g.constant(np.asarray(array, dtype=KILN_TO_NUMPY[dtype], order="C"), dtype)

    def scalar(self, value, dtype):
        return self.constant(np.array(value), dtype)

    def operand(self, x, dtype):
        """A tensor operand or a Python number, as a Kiln value of `dtype`."""
        if isinstance(x, torch.fx.Node):
            if isinstance(meta_val(x), torch.Tensor):
                return self.cast(self.v(x), dtype)
            x = meta_val(x)
            if not isinstance(x, (int, float, bool)):
                raise LoweringError(f"symbolic scalar operand {x} (a size used as a value)")
        if isinstance(x, (bool, int, float)):
            return self.scalar(x, dtype)
        raise LoweringError(f"unsupported operand {x!r}")

    def reshape(self, value, shape):
        return self.op("reshape", [value], shape=list(shape))


def constant_array(t):
    """(numpy array, kiln dtype) holding a real tensor's values (bf16 widened to f32: exact)."""
    t = t.detach().cpu()
    return (t.float().numpy() if t.dtype == torch.bfloat16 else t.numpy()), kiln_dtype(t.dtype)


def lower_graph(gm, name, input_metas, constants=None):
    """Lowers a GraphModule whose nodes are all supported into a Kiln graph. `input_metas`: one
    meta value (FakeTensor, SymInt or int) per placeholder; `constants`: placeholder name -> tensor
    (or (array, kiln dtype)) baked into the graph (frozen weights) instead of an input. Returns (graph, tensor placeholder
    positions, output structure: 'single' or 'tuple')."""
    ctx = LoweringContext(name)
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    if len(placeholders) != len(input_metas):
        raise LoweringError(f"{len(placeholders)} placeholders but {len(input_metas)} input metas")
    tensor_positions, input_symbols = [], set()
    for i, (p, m) in enumerate(zip(placeholders, input_metas)):
        p.meta["val"] = m
        if constants and p.name in constants:
            c = constants[p.name]
            ctx.node = p
            ctx.env[p] = ctx.constant(*(c if isinstance(c, tuple) else constant_array(c)))
            continue
        if isinstance(m, torch.Tensor):
            shape = [symbolic.dim(d) for d in m.shape]
            for d in shape:
                if not isinstance(d, int) and not d.isidentifier():
                    raise LoweringError(f"input {p.name} has a size that is an expression ({d}): Kiln binds "
                                        "symbolic sizes from plain names")
                input_symbols |= symbolic.symbols_of(d)
            ctx.env[p] = ctx.g.input(p.name, kiln_dtype(m.dtype), shape)
            tensor_positions.append(i)
        else:
            ctx.env[p] = m  # a size: its expression is read from meta where used
    outputs, structure = [], "single"
    for node in gm.graph.nodes:
        if node.op in ("placeholder",):
            continue
        if node.op == "get_attr":
            t = getattr(gm, node.target)
            node.meta.setdefault("val", t)
            ctx.node = node
            ctx.env[node] = ctx.constant(*constant_array(t))
            continue
        if node.op == "output":
            res = node.args[0]
            if isinstance(res, (list, tuple)):
                structure = "tuple"
                outputs = list(res)
            else:
                outputs = [res]
            continue
        reason = support_reason(node)
        if reason:
            raise LoweringError(f"node {node.name}: {reason}")
        ctx.node = node
        if node.target is operator.getitem:
            src, index = node.args
            ctx.env[node] = ctx.env[src][index]
            continue
        ctx.env[node] = LOWERINGS[node.target].fn(ctx, node)
    out_values = []
    for o in outputs:
        if not isinstance(o, torch.fx.Node) or not isinstance(meta_val(o), torch.Tensor):
            raise LoweringError(f"partition output {o} is not a tensor")
        out_values.append(ctx.v(o))
    for v in out_values:
        for d in v.shape:
            missing = symbolic.symbols_of(d) - input_symbols
            if missing:
                raise LoweringError(f"output size {d} uses {', '.join(sorted(missing))}, which no input's shape gives")
    for i, (o, v) in enumerate(zip(outputs, out_values)):
        if not v.name:  # outputs get names (`kiln run DIR --expect NAME=...`, sessions' .outputs)
            v.name = o.name if o.name not in (x.name for x in out_values) else f"output{i}"
    ctx.g.set_outputs(out_values)
    return ctx.g, tensor_positions, structure


# The op lowerings register themselves into LOWERINGS when imported (they import this module).
from kiln.torch_backend import ops_elementwise, ops_nn, ops_reduce_create, ops_shape  # noqa: E402,F401

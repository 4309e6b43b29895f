"""ATen elementwise ops (unary, binary with type promotion, comparisons, where, clamp) -> Kiln.

Why: Kiln's binary ops take operands of one dtype (src/ir/ops.def); torch promotes. Each lowering
casts its operands to the dtype torch computes in, read from the node's fake result.
"""
import torch

from kiln.torch_backend.errors import LoweringError
from kiln.torch_backend.lowering import kiln_dtype, lowers, meta_val

aten = torch.ops.aten


def _compute_dtype(node, *operands):
    """The dtype torch computes a binary op in: torch.result_type over stand-ins of the operands
    (a tensor's dtype and whether it is 0-d matter, not its values)."""
    vals = []
    for x in operands:
        m = meta_val(x)
        if isinstance(m, torch.Tensor):
            vals.append(torch.empty((1,) if m.dim() else (), dtype=m.dtype))
        elif isinstance(m, (bool, int, float)):
            vals.append(m)
        else:
            raise LoweringError(f"operand {x} is symbolic")
    if len(vals) == 1:
        return kiln_dtype(vals[0].dtype)
    d = torch.result_type(vals[0], vals[1])
    return kiln_dtype(d)


def _is_number_or_tensor(x):
    m = meta_val(x)
    return isinstance(m, (torch.Tensor, bool, int, float))


def _binary_check(node):
    for x in node.args[:2]:
        if not _is_number_or_tensor(x) or isinstance(meta_val(x), torch.SymInt):
            return f"operand {x} is not a tensor or a number"
    return None


# ---- unary ----
UNARY_FLOAT = {
    aten.exp.default: "exp", aten.log.default: "log", aten.sqrt.default: "sqrt", aten.rsqrt.default: "rsqrt",
    aten.reciprocal.default: "reciprocal", aten.tanh.default: "tanh", aten.sigmoid.default: "sigmoid",
    aten.erf.default: "erf", aten.sin.default: "sin", aten.cos.default: "cos", aten.asin.default: "asin",
    aten.acos.default: "acos", aten.atan.default: "atan", aten.sinh.default: "sinh", aten.cosh.default: "cosh",
    aten.asinh.default: "asinh", aten.acosh.default: "acosh", aten.atanh.default: "atanh",
    aten.silu.default: "silu",
}
UNARY_SAME = {
    aten.neg.default: "neg", aten.abs.default: "abs", aten.relu.default: "relu", aten.sign.default: "sign",
}


def _unary(name):
    def fn(ctx, node):
        out = ctx.out_dtype()
        return ctx.op(name, [ctx.cast(ctx.v(node.args[0]), out)])
    return fn


for _t, _name in list(UNARY_FLOAT.items()) + list(UNARY_SAME.items()):
    lowers(_t)(_unary(_name))


@lowers(aten.floor.default, aten.ceil.default, aten.round.default)
def _rounding(ctx, node):
    x = ctx.v(node.args[0])
    if x.dtype in ("f32", "f64", "f16", "bf16"):
        return ctx.op(node.target.__name__.split(".")[0], [x])
    return x  # integers are already whole


@lowers(aten.gelu.default)
def _gelu(ctx, node):
    return ctx.op("gelu", [ctx.v(node.args[0])], approximate=node.kwargs.get("approximate", "none"))


@lowers(aten.isnan.default)
def _isnan(ctx, node):
    return ctx.op("isnan", [ctx.v(node.args[0])])


@lowers(aten.logical_not.default)
def _logical_not(ctx, node):
    x = ctx.v(node.args[0])
    b = x if x.dtype == "bool" else ctx.op("ne", [x, ctx.scalar(0, x.dtype)])
    return ctx.cast(ctx.op("not", [b]), ctx.out_dtype())


@lowers(aten.bitwise_not.default)
def _bitwise_not(ctx, node):
    x = ctx.v(node.args[0])
    return ctx.op("not" if x.dtype == "bool" else "bit_not", [x])


# ---- binary arithmetic ----
def _arith(name, has_alpha=False):
    def fn(ctx, node):
        out = ctx.out_dtype()
        a, b = node.args[0], node.args[1]
        compute = _compute_dtype(node, a, b)
        av, bv = ctx.operand(a, compute), ctx.operand(b, compute)
        alpha = node.kwargs.get("alpha", 1)
        if has_alpha and alpha != 1:
            bv = ctx.op("mul", [bv, ctx.scalar(alpha, compute)])
        return ctx.cast(ctx.op(name, [av, bv]), out)
    return fn


for _ts, _name, _alpha in [
    ((aten.add.Tensor, aten.add.Scalar), "add", True),
    ((aten.sub.Tensor, aten.sub.Scalar), "sub", True),
    ((aten.mul.Tensor, aten.mul.Scalar), "mul", False),
    ((aten.maximum.default,), "max", False),
    ((aten.minimum.default,), "min", False),
    ((aten.pow.Tensor_Tensor, aten.pow.Tensor_Scalar), "pow", False),
]:
    lowers(*_ts, check=_binary_check)(_arith(_name, _alpha))


@lowers(aten.rsub.Scalar, aten.rsub.Tensor, check=_binary_check)
def _rsub(ctx, node):
    compute = _compute_dtype(node, node.args[0], node.args[1])
    a, b = ctx.operand(node.args[0], compute), ctx.operand(node.args[1], compute)
    alpha = node.kwargs.get("alpha", 1)
    if alpha != 1:
        a = ctx.op("mul", [a, ctx.scalar(alpha, compute)])
    return ctx.cast(ctx.op("sub", [b, a]), ctx.out_dtype())


@lowers(aten.pow.Scalar, check=lambda n: None if isinstance(n.args[0], (int, float)) else "base is not a number")
def _pow_scalar_base(ctx, node):
    out = ctx.out_dtype()
    return ctx.op("pow", [ctx.scalar(node.args[0], out), ctx.cast(ctx.v(node.args[1]), out)])


def _div_check(node):
    reason = _binary_check(node)
    if reason:
        return reason
    mode = node.kwargs.get("rounding_mode")
    floating = node.meta["val"].dtype.is_floating_point
    if mode == "trunc" and floating:
        return "trunc division of floats"
    return None


@lowers(aten.div.Tensor, aten.div.Scalar, aten.div.Tensor_mode, aten.div.Scalar_mode, check=_div_check)
def _div(ctx, node):
    out = ctx.out_dtype()
    mode = node.kwargs.get("rounding_mode")
    compute = out if mode is None else _compute_dtype(node, node.args[0], node.args[1])
    a, b = ctx.operand(node.args[0], compute), ctx.operand(node.args[1], compute)
    if mode == "floor" and compute not in ("f32", "f64", "f16", "bf16"):
        # Integers: a - (a mod b) is a multiple of b (mod takes the divisor's sign), so the
        # truncating division of it is exact and equals floor(a / b).
        return ctx.cast(ctx.op("div", [ctx.op("sub", [a, ctx.op("mod", [a, b])]), b]), out)
    q = ctx.op("div", [a, b])
    if mode == "floor":
        q = ctx.op("floor", [q])
    return ctx.cast(q, out)


@lowers(aten.remainder.Tensor, aten.remainder.Scalar, aten.fmod.Tensor, aten.fmod.Scalar, check=_binary_check)
def _remainder(ctx, node):
    compute = _compute_dtype(node, node.args[0], node.args[1])
    fmod = 1 if node.target in (aten.fmod.Tensor, aten.fmod.Scalar) else 0
    r = ctx.op("mod", [ctx.operand(node.args[0], compute), ctx.operand(node.args[1], compute)], fmod=fmod)
    return ctx.cast(r, ctx.out_dtype())


# ---- comparisons and logic ----
COMPARISONS = {"eq": "eq", "ne": "ne", "lt": "lt", "le": "le", "gt": "gt", "ge": "ge"}
for _name in COMPARISONS:
    def _cmp(ctx, node, _name=_name):
        compute = _compute_dtype(node, node.args[0], node.args[1])
        return ctx.op(_name, [ctx.operand(node.args[0], compute), ctx.operand(node.args[1], compute)])
    lowers(getattr(aten, _name).Tensor, getattr(aten, _name).Scalar, check=_binary_check)(_cmp)


for _t, _name in [(aten.logical_and.default, "and"), (aten.logical_or.default, "or"),
                  (aten.logical_xor.default, "xor")]:
    def _logic(ctx, node, _name=_name):
        def as_bool(x):
            v = ctx.v(x)
            return v if v.dtype == "bool" else ctx.op("ne", [v, ctx.scalar(0, v.dtype)])
        return ctx.cast(ctx.op(_name, [as_bool(node.args[0]), as_bool(node.args[1])]), ctx.out_dtype())
    lowers(_t)(_logic)


for _t, _bool, _int in [(aten.bitwise_and.Tensor, "and", "bit_and"), (aten.bitwise_or.Tensor, "or", "bit_or"),
                        (aten.bitwise_xor.Tensor, "xor", "bit_xor")]:
    def _bitwise(ctx, node, _bool=_bool, _int=_int):
        out = ctx.out_dtype()
        return ctx.op(_bool if out == "bool" else _int, [ctx.operand(node.args[0], out), ctx.operand(node.args[1], out)])
    lowers(_t, check=_binary_check)(_bitwise)


@lowers(aten.where.self, aten.where.ScalarSelf, aten.where.ScalarOther, aten.where.Scalar)
def _where(ctx, node):
    cond, a, b = node.args
    out = ctx.out_dtype()
    c = ctx.v(cond)
    if c.dtype != "bool":
        c = ctx.op("ne", [c, ctx.scalar(0, c.dtype)])
    return ctx.op("where", [c, ctx.operand(a, out), ctx.operand(b, out)])


def _clamp_check(node):
    for bound in node.args[1:3]:
        if bound is not None and not isinstance(bound, (int, float)):
            return "clamp bounds are tensors"
    return None


@lowers(aten.clamp.default, aten.hardtanh.default, check=_clamp_check)
def _clamp(ctx, node):
    x = ctx.v(node.args[0])
    args = list(node.args[1:]) + [None, None]
    lo, hi = args[0], args[1]
    if node.target == aten.hardtanh.default:
        lo = -1.0 if lo is None else lo
        hi = 1.0 if hi is None else hi
    attrs = {}
    if lo is not None:
        attrs["min"] = float(lo)
    if hi is not None:
        attrs["max"] = float(hi)
    out = ctx.out_dtype()
    return ctx.op("clamp", [ctx.cast(x, out)], **attrs)


@lowers(aten.clamp_min.default, aten.clamp_max.default, check=lambda n: None if isinstance(n.args[1], (int, float))
        else "clamp bound is a tensor")
def _clamp_one(ctx, node):
    key = "min" if node.target == aten.clamp_min.default else "max"
    return ctx.op("clamp", [ctx.cast(ctx.v(node.args[0]), ctx.out_dtype())], **{key: float(node.args[1])})


@lowers(aten.leaky_relu.default)
def _leaky_relu(ctx, node):
    x = ctx.v(node.args[0])
    slope = node.args[1] if len(node.args) > 1 else 0.01
    pos = ctx.op("gt", [x, ctx.scalar(0, x.dtype)])
    return ctx.op("where", [pos, x, ctx.op("mul", [x, ctx.scalar(slope, x.dtype)])])


@lowers(aten.hardswish.default)
def _hardswish(ctx, node):
    x = ctx.v(node.args[0])
    r = ctx.op("clamp", [ctx.op("add", [x, ctx.scalar(3, x.dtype)])], min=0.0, max=6.0)
    return ctx.op("div", [ctx.op("mul", [x, r]), ctx.scalar(6, x.dtype)])


@lowers(aten.hardsigmoid.default)
def _hardsigmoid(ctx, node):
    x = ctx.v(node.args[0])
    r = ctx.op("clamp", [ctx.op("add", [x, ctx.scalar(3, x.dtype)])], min=0.0, max=6.0)
    return ctx.op("div", [r, ctx.scalar(6, x.dtype)])

"""ATen reductions (sum, mean, amax, argmax, any...) and tensor creation (full, arange,
scalar_tensor...) -> Kiln.

Why: creation ops become Kiln sources whose shapes may be symbolic (a mask of length T), so the
compiled graph serves every size; reductions keep torch's dims/keepdim/dtype meaning.
"""
import torch

from kiln.torch_backend.lowering import lowers, meta_val

aten = torch.ops.aten


def _axes(dims, rank):
    if dims is None or dims == []:
        return list(range(rank))
    if isinstance(dims, int):
        dims = [dims]
    return sorted(d + rank if d < 0 else d for d in dims)


def _reduce(kiln_name):
    def fn(ctx, node):
        x = node.args[0]
        rank = meta_val(x).dim()
        dims = node.args[1] if len(node.args) > 1 else node.kwargs.get("dim")
        keepdim = node.args[2] if len(node.args) > 2 else node.kwargs.get("keepdim", False)
        if node.target in (aten.sum.default, aten.mean.default, aten.max.default, aten.min.default,
                           aten.prod.default):  # the overloads that reduce everything
            dims, keepdim = None, False
        out = ctx.out_dtype()
        xv = ctx.cast(ctx.v(x), out) if kiln_name in ("reduce_sum", "reduce_mean", "reduce_prod") else ctx.v(x)
        if rank == 0:
            return xv
        return ctx.cast(ctx.op(kiln_name, [xv], axes=_axes(dims, rank), keepdim=int(bool(keepdim))), out)
    return fn


lowers(aten.sum.dim_IntList, aten.sum.default)(_reduce("reduce_sum"))
lowers(aten.mean.dim, aten.mean.default)(_reduce("reduce_mean"))
lowers(aten.amax.default, aten.max.default)(_reduce("reduce_max"))
lowers(aten.amin.default, aten.min.default)(_reduce("reduce_min"))
lowers(aten.prod.dim_int, aten.prod.default)(_reduce("reduce_prod"))


def _bool_reduce(kiln_name):
    def fn(ctx, node):
        x = node.args[0]
        rank = meta_val(x).dim()
        dims = node.args[1] if len(node.args) > 1 else None
        keepdim = node.args[2] if len(node.args) > 2 else node.kwargs.get("keepdim", False)
        v = ctx.v(x)
        as_int = ctx.cast(v if v.dtype == "bool" else ctx.op("ne", [v, ctx.scalar(0, v.dtype)]), "i32")
        if rank == 0:
            return ctx.cast(as_int, ctx.out_dtype())
        r = ctx.op(kiln_name, [as_int], axes=_axes(dims, rank), keepdim=int(bool(keepdim)))
        return ctx.cast(r, ctx.out_dtype())
    return fn


lowers(aten.any.dim, aten.any.dims, aten.any.default)(_bool_reduce("reduce_max"))
lowers(aten.all.dim, aten.all.dims, aten.all.default)(_bool_reduce("reduce_min"))


def _arg(kiln_name):
    def fn(ctx, node):
        x = node.args[0]
        dim = node.args[1] if len(node.args) > 1 else node.kwargs.get("dim")
        keepdim = node.args[2] if len(node.args) > 2 else node.kwargs.get("keepdim", False)
        v = ctx.v(x)
        if dim is None:  # over the flattened tensor
            r = ctx.op(kiln_name, [ctx.reshape(v, [-1])], axis=0, keepdim=0)
            return ctx.reshape(r, ctx.out_shape())
        rank = meta_val(x).dim()
        return ctx.op(kiln_name, [v], axis=dim % rank if rank else 0, keepdim=int(bool(keepdim)))
    return fn


lowers(aten.argmax.default)(_arg("argmax"))
lowers(aten.argmin.default)(_arg("argmin"))


def _full_check(node):
    value = node.args[1] if len(node.args) > 1 else None
    if not isinstance(value, (int, float, bool)):
        return "a fill value that is not a number"
    return None


@lowers(aten.full.default, aten.full_like.default, aten.new_full.default, check=_full_check)
def _full(ctx, node):
    return ctx.op("full", [], shape=ctx.out_shape(), value=float(node.args[1]), dtype=ctx.out_dtype())


@lowers(aten.zeros_like.default, aten.new_zeros.default, aten.zeros.default, aten.empty.memory_format,
        aten.empty_like.default, aten.new_empty.default)
def _zeros(ctx, node):  # empty's values are unspecified: zeros are as good as any
    return ctx.op("full", [], shape=ctx.out_shape(), value=0.0, dtype=ctx.out_dtype())


@lowers(aten.ones_like.default, aten.new_ones.default, aten.ones.default)
def _ones(ctx, node):
    return ctx.op("full", [], shape=ctx.out_shape(), value=1.0, dtype=ctx.out_dtype())


@lowers(aten.scalar_tensor.default)
def _scalar_tensor(ctx, node):
    return ctx.scalar(node.args[0], ctx.out_dtype())


def _arange_args(node):
    a = list(node.args)
    if node.target == aten.arange.default:
        return 0, a[0], 1
    if node.target == aten.arange.start:
        return a[0], a[1], 1
    return a[0], a[1], a[2] if len(a) > 2 else 1


def _arange_check(node):
    start, _end, step = _arange_args(node)
    if not isinstance(start, (int, float)) or not isinstance(step, (int, float)):
        return "arange with a symbolic start or step"
    return None


@lowers(aten.arange.default, aten.arange.start, aten.arange.start_step, check=_arange_check)
def _arange(ctx, node):
    start, _end, step = _arange_args(node)
    return ctx.op("arange", [], size=ctx.out_shape(), start=float(start), step=float(step), dtype=ctx.out_dtype())



def _topk_check(node):
    if not isinstance(node.args[1], int):
        return "topk with a symbolic k"
    return None


@lowers(aten.topk.default, check=_topk_check, outputs="all")
def _topk(ctx, node):
    args = list(node.args) + [None] * 4
    x, k, dim, largest, is_sorted = args[:5]
    dim = -1 if dim is None else dim
    rank = meta_val(x).dim()
    return ctx.op_multi("topk", [ctx.v(x)], k=int(k), axis=dim % rank if rank else 0,
                        largest=int(largest is None or bool(largest)), sorted=1)


def _sort_args(node):
    """(x, dim, descending) of aten.sort.default (x, dim, descending) or aten.sort.stable (x, *,
    stable, dim, descending)."""
    if node.target == aten.sort.stable:
        return node.args[0], node.kwargs.get("dim", -1), bool(node.kwargs.get("descending", False))
    args = list(node.args) + [None] * 3
    return args[0], -1 if args[1] is None else args[1], bool(args[2])


def _sort_check(node):
    x, _, _ = _sort_args(node)
    if not meta_val(x).shape:
        return "sort of a 0-d tensor"
    return None


@lowers(aten.sort.default, aten.sort.stable, check=_sort_check, outputs="all")
def _sort(ctx, node):
    """Kiln's sort is stable: ties keep the lower index first (stable=True's order, a valid one for
    stable=False) and NaN sorts as the largest value, as in torch; the dim may be symbolic."""
    x, dim, descending = _sort_args(node)
    rank = meta_val(x).dim()
    return ctx.op_multi("sort", [ctx.v(x)], axis=dim % rank, descending=int(descending))


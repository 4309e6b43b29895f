"""ATen views, copies and indexing (view, permute, expand, slice, select, cat, split, gather...)
-> Kiln movement ops.

Why: Kiln tensors are values, not strided views: every view becomes the movement op that yields
the same elements (a reshape, permute or slice), and the compiler decides what to materialise.
Result shapes are read from the node's fake result, so -1 and symbolic sizes need no arithmetic.
"""
import torch

from kiln.torch_backend.lowering import lowers, meta_val

aten = torch.ops.aten
INT64_MAX = 9223372036854775807


def _rank(x):
    return meta_val(x).dim()


def _axis(d, rank):
    return d + rank if d < 0 else d


@lowers(aten.view.default, aten._unsafe_view.default, aten.reshape.default, aten.squeeze.dim, aten.squeeze.dims,
        aten.squeeze.default, aten.view_copy.default, aten.flatten.using_ints)
def _reshape(ctx, node):
    return ctx.reshape(ctx.v(node.args[0]), ctx.out_shape())


@lowers(aten.unsqueeze.default)
def _unsqueeze(ctx, node):
    return ctx.op("unsqueeze", [ctx.v(node.args[0])], axes=[_axis(node.args[1], _rank(node))])


@lowers(aten.clone.default, aten.alias.default, aten.detach.default, aten.lift_fresh_copy.default,
        aten.contiguous.default)
def _identity(ctx, node):
    return ctx.v(node.args[0])


def _to_copy_check(node):
    if node.kwargs.get("device") is not None and str(node.kwargs["device"]) != str(meta_val(node.args[0]).device):
        return "a copy to another device"
    return None


@lowers(aten._to_copy.default, check=_to_copy_check)
@lowers(torch.ops.prims.convert_element_type.default)
def _to_copy(ctx, node):
    return ctx.cast(ctx.v(node.args[0]), ctx.out_dtype())


@lowers(aten.permute.default)
def _permute(ctx, node):
    r = _rank(node.args[0])
    return ctx.op("permute", [ctx.v(node.args[0])], perm=[_axis(d, r) for d in node.args[1]])


@lowers(aten.t.default)
def _t(ctx, node):
    x = ctx.v(node.args[0])
    return x if _rank(node.args[0]) < 2 else ctx.op("permute", [x], perm=[1, 0])


@lowers(aten.transpose.int)
def _transpose(ctx, node):
    r = _rank(node.args[0])
    perm = list(range(r))
    a, b = _axis(node.args[1], r), _axis(node.args[2], r)
    perm[a], perm[b] = perm[b], perm[a]
    return ctx.op("permute", [ctx.v(node.args[0])], perm=perm)


@lowers(aten.expand.default, aten.expand_copy.default)
def _expand(ctx, node):
    x = ctx.v(node.args[0])
    out = ctx.out_shape()
    if list(x.shape) == out:
        return x
    return ctx.op("expand", [x], shape=out)


def _slice_args(node):
    args = list(node.args) + [None] * 5
    x, dim, start, end, step = args[0], args[1] or 0, args[2], args[3], args[4]
    return x, dim, 0 if start is None else start, INT64_MAX if end is None else end, 1 if step is None else step


def _slice_check(node):
    _, _, start, end, step = _slice_args(node)
    if not isinstance(start, int):
        return "a slice with a symbolic start"
    if not isinstance(step, int) or step <= 0:
        return "a slice with a symbolic or non-positive step"
    if not isinstance(end, int) and start < 0:
        return "a slice with a symbolic end and a negative start"
    return None


@lowers(aten.slice.Tensor, aten.slice_copy.Tensor, check=_slice_check)
def _slice(ctx, node):
    x, dim, start, end, step = _slice_args(node)
    axis = _axis(dim, _rank(x))
    xv = ctx.v(x)
    if isinstance(end, int):
        if start == 0 and end >= INT64_MAX and step == 1:
            return xv
        return ctx.op("slice", [xv], starts=[start], ends=[end], axes=[axis], steps=[step])
    # A symbolic end: the elements start, start+step, ... as an index_select over an arange of
    # the result's (symbolic) length.
    length = ctx.out_shape()[axis]
    index = ctx.op("arange", [], size=[length], start=float(start), step=float(step), dtype="i64")
    return ctx.op("index_select", [xv, index], axis=axis)


@lowers(aten.select.int, check=lambda n: None if isinstance(n.args[2], int) else "a symbolic index")
def _select(ctx, node):
    x, dim, index = node.args
    axis = _axis(dim, _rank(x))
    end = index + 1 if index != -1 else INT64_MAX
    s = ctx.op("slice", [ctx.v(x)], starts=[index], ends=[end], axes=[axis], steps=[1])
    return ctx.reshape(s, ctx.out_shape())


@lowers(aten.cat.default)
def _cat(ctx, node):
    def legacy_empty(t):  # torch.cat skips 1-D empty tensors of any other shape
        m = meta_val(t)
        return m.dim() == 1 and isinstance(m.shape[0], int) and m.shape[0] == 0
    tensors = [t for t in node.args[0] if not legacy_empty(t)]
    dim = node.args[1] if len(node.args) > 1 else node.kwargs.get("dim", 0)
    out = ctx.out_dtype()
    vals = [ctx.cast(ctx.v(t), out) for t in tensors]
    if len(vals) == 1:
        return vals[0]
    return ctx.op("concat", vals, axis=_axis(dim, _rank(node)))


def _split_sizes(node):
    sizes = [m.shape[_axis(node.args[2] if len(node.args) > 2 else node.kwargs.get("dim", 0), m.dim())]
             for m in node.meta["val"]]
    return sizes


def _split_check(node):
    for s in _split_sizes(node):
        if not isinstance(s, int):
            return "a split into symbolic sizes"
    return None


@lowers(aten.split_with_sizes.default, aten.split.Tensor, check=_split_check, outputs="all")
def _split(ctx, node):
    x = node.args[0]
    dim = node.args[2] if len(node.args) > 2 else node.kwargs.get("dim", 0)
    sizes = [int(s) for s in _split_sizes(node)]
    if len(sizes) == 1:
        return [ctx.v(x)]
    return ctx.op_multi("split", [ctx.v(x)], axis=_axis(dim, _rank(x)), sizes=sizes)


def _pad_check(node):
    pads = node.args[1]
    if any(not isinstance(p, int) or p < 0 for p in pads):
        return "negative or symbolic padding"
    return None


@lowers(aten.constant_pad_nd.default, check=_pad_check)
def _constant_pad(ctx, node):
    x = node.args[0]
    pads = node.args[1]
    value = node.args[2] if len(node.args) > 2 else 0
    r = _rank(x)
    begin, end = [0] * r, [0] * r
    for i in range(len(pads) // 2):
        axis = r - 1 - i
        begin[axis], end[axis] = pads[2 * i], pads[2 * i + 1]
    return ctx.op("pad", [ctx.v(x)], pads=begin + end, mode="constant", value=float(value))


@lowers(aten.embedding.default)
def _embedding(ctx, node):
    weight, indices = node.args[0], node.args[1]
    return ctx.op("gather", [ctx.v(weight), ctx.v(indices)], axis=0)


@lowers(aten.index_select.default)
def _index_select(ctx, node):
    x, dim, index = node.args
    return ctx.op("index_select", [ctx.v(x), ctx.v(index)], axis=_axis(dim, _rank(x)))


@lowers(aten.gather.default)
def _gather(ctx, node):
    x, dim, index = node.args[:3]
    return ctx.op("gather_elements", [ctx.v(x), ctx.v(index)], axis=_axis(dim, _rank(x)))


def _index_check(node):
    indices = node.args[1]
    real = [i for i in indices if i is not None]
    if len(real) != 1:
        return "indexing with more than one index tensor"
    if meta_val(real[0]).dtype == torch.bool:
        return "indexing with a boolean mask (data-dependent size)"
    return None


@lowers(aten.index.Tensor, check=_index_check)
def _index(ctx, node):
    x, indices = node.args
    axis = next(i for i, t in enumerate(indices) if t is not None)
    return ctx.op("gather", [ctx.v(x), ctx.v(indices[axis])], axis=axis)


@lowers(aten.tril.default, aten.triu.default)
def _triangle(ctx, node):
    k = node.args[1] if len(node.args) > 1 else 0
    name = "tril" if node.target == aten.tril.default else "triu"
    return ctx.op(name, [ctx.v(node.args[0])], k=k)


@lowers(aten.cumsum.default)
def _cumsum(ctx, node):
    x = node.args[0]
    return ctx.op("cumsum", [ctx.cast(ctx.v(x), ctx.out_dtype())], axis=_axis(node.args[1], _rank(x)))



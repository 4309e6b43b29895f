"""ATen neural-network ops (convolution, batch/layer norm, pooling, matmuls, softmax, attention)
-> Kiln's high-level ops, which the compiler fuses or hands to oneDNN / BLAS.

Why: keeping these whole (instead of decomposing them in torch) is what lets Kiln pick its fused
kernels: scaled_dot_product_attention stays one `attention` node.
"""
import numpy as np
import torch

from kiln.torch_backend.errors import LoweringError
from kiln.torch_backend.lowering import lowers, meta_val

aten = torch.ops.aten


def _pair(v, n=2):
    v = list(v) if isinstance(v, (list, tuple)) else [v]
    return v * n if len(v) == 1 else v


def _conv_check(node):
    x = meta_val(node.args[0])
    if x.dim() != 4:
        return f"a {x.dim() - 2}-d convolution (Kiln has conv2d)"
    padding = node.args[4]
    if isinstance(padding, str) or any(not isinstance(p, int) for p in _pair(padding)):
        return "string or symbolic padding"
    return None


@lowers(aten.convolution.default, check=_conv_check)
def _convolution(ctx, node):
    x, w, b, stride, padding, dilation, transposed, output_padding, groups = node.args
    ph, pw = _pair(padding)
    attrs = dict(strides=_pair(stride), pads=[ph, pw, ph, pw], dilations=_pair(dilation), groups=int(groups))
    operands = [ctx.v(x), ctx.v(w)] + ([ctx.v(b)] if b is not None else [])
    if transposed:
        return ctx.op("conv_transpose2d", operands, output_padding=_pair(output_padding), **attrs)
    return ctx.op("conv2d", operands, **attrs)


def _channels(ctx, x):
    c = meta_val(x).shape[1]
    if not isinstance(c, int):
        raise LoweringError("a symbolic channel count")
    return c


@lowers(aten._native_batch_norm_legit_no_training.default, outputs={0})
def _batch_norm(ctx, node):
    x, w, b, mean, var, _momentum, eps = node.args
    dtype = ctx.out_dtype(0)
    c = _channels(ctx, x)
    scale = ctx.v(w) if w is not None else ctx.constant(np.ones(c), dtype)
    bias = ctx.v(b) if b is not None else ctx.constant(np.zeros(c), dtype)
    return [ctx.op("batch_norm", [ctx.v(x), scale, bias, ctx.v(mean), ctx.v(var)], eps=float(eps)), None, None]


@lowers(aten.native_layer_norm.default, outputs={0})
def _layer_norm(ctx, node):
    x, shape, w, b, eps = node.args
    operands = [ctx.v(x)]
    if w is not None or b is not None:
        operands.append(ctx.v(w) if w is not None else ctx.constant(np.ones(list(shape)), ctx.out_dtype(0)))
    if b is not None:
        operands.append(ctx.v(b))
    return [ctx.op("layer_norm", operands, axis=-len(shape), eps=float(eps)), None, None]


def _pool_window(kernel, stride, padding):
    """aten's pooling window (stride empty means stride = kernel; symmetric padding) as Kiln's attributes."""
    kernel = _pair(kernel)
    ph, pw = _pair(padding or 0)
    return dict(kernel=kernel, strides=_pair(stride) if stride else kernel, pads=[ph, pw, ph, pw])


def _pool_check(node):
    if meta_val(node.args[0]).dim() != 4:
        return "pooling over a 3-d input (Kiln pools NCHW)"
    return None


@lowers(aten.max_pool2d_with_indices.default, check=_pool_check, outputs={0})
def _max_pool(ctx, node):
    args = list(node.args) + [None] * 6
    x, kernel, stride, padding, dilation, ceil_mode = args[:6]
    out = ctx.op("max_pool2d", [ctx.v(x)], **_pool_window(kernel, stride, padding),
                 dilations=_pair(dilation or 1), ceil_mode=int(bool(ceil_mode)))
    return [out, None]


def _avg_pool_check(node):
    reason = _pool_check(node)
    if reason:
        return reason
    if len(node.args) > 6 and node.args[6] is not None:
        return "avg_pool2d with divisor_override"
    return None


@lowers(aten.avg_pool2d.default, check=_avg_pool_check)
def _avg_pool(ctx, node):
    args = list(node.args) + [None] * 7
    x, kernel, stride, padding, ceil_mode, count_include_pad = args[:6]
    return ctx.op("avg_pool2d", [ctx.v(x)], **_pool_window(kernel, stride, padding),
                  ceil_mode=int(bool(ceil_mode)), count_include_pad=int(count_include_pad is None or count_include_pad))


def _adaptive_check(node):
    x = meta_val(node.args[0])
    out = list(node.args[1])
    if x.dim() != 4:
        return "adaptive pooling over a 3-d input"
    if out == [1, 1]:
        return None
    h, w = x.shape[2], x.shape[3]
    if not all(isinstance(d, int) for d in (h, w)) or h % out[0] or w % out[1]:
        return "adaptive pooling whose windows differ in size"
    return None


@lowers(aten._adaptive_avg_pool2d.default, aten.adaptive_avg_pool2d.default, check=_adaptive_check)
def _adaptive_avg_pool(ctx, node):
    x = node.args[0]
    out = list(node.args[1])
    if out == [1, 1]:
        return ctx.op("reduce_mean", [ctx.v(x)], axes=[2, 3], keepdim=1)
    h, w = meta_val(x).shape[2], meta_val(x).shape[3]
    k = [h // out[0], w // out[1]]
    return ctx.op("avg_pool2d", [ctx.v(x)], kernel=k, strides=k)


def _scale_check(node):
    for key in ("beta", "alpha"):
        if node.kwargs.get(key, 1) != 1:
            return f"addmm with {key} != 1"
    return None


@lowers(aten.addmm.default, check=_scale_check)
def _addmm(ctx, node):
    bias, a, b = node.args
    return ctx.op("add", [ctx.op("matmul", [ctx.v(a), ctx.v(b)]), ctx.v(bias)])


@lowers(aten.mm.default, aten.bmm.default, aten.matmul.default)
def _matmul(ctx, node):
    return ctx.op("matmul", [ctx.v(node.args[0]), ctx.v(node.args[1])])


@lowers(aten.linear.default)
def _linear(ctx, node):
    x, w = node.args[0], node.args[1]
    b = node.args[2] if len(node.args) > 2 else None
    y = ctx.op("matmul", [ctx.v(x), ctx.op("permute", [ctx.v(w)], perm=[1, 0])])
    return ctx.op("add", [y, ctx.v(b)]) if b is not None else y


def _softmax_fn(name):
    def fn(ctx, node):
        x, dim = node.args[0], node.args[1]
        out = ctx.out_dtype()
        return ctx.op(name, [ctx.cast(ctx.v(x), out)], axis=dim if dim >= 0 else dim + meta_val(x).dim())
    return fn


lowers(aten._softmax.default, aten.softmax.int)(_softmax_fn("softmax"))
lowers(aten._log_softmax.default, aten.log_softmax.int)(_softmax_fn("log_softmax"))


def _sdpa_args(node):
    names = ["query", "key", "value", "dropout_p", "is_causal"]
    args = dict(zip(names, node.args))
    args.update(node.kwargs)
    return args


def _sdpa_check(node):
    a = _sdpa_args(node)
    if a.get("dropout_p", 0.0) not in (0, 0.0):
        return "attention with dropout"
    q, k = meta_val(a["query"]), meta_val(a["key"])
    if q.dim() != k.dim() or q.shape[:-2] != k.shape[:-2]:
        return "attention whose q and k batch dims differ (grouped-query attention)"
    if a.get("is_causal") and str(q.shape[-2]) != str(k.shape[-2]):
        return "causal attention with different query and key lengths (torch aligns the mask top-left)"
    if a.get("enable_gqa"):
        return "grouped-query attention"
    return None


# scaled_dot_product_attention reaches AOTAutograd's graph as the CPU flash kernel (its
# decomposition is removed from the table: kiln.torch_backend.backend), or whole.
@lowers(aten._scaled_dot_product_flash_attention_for_cpu.default, check=_sdpa_check, outputs={0})
def _sdpa_cpu(ctx, node):
    return [_attention(ctx, node), None]


@lowers(aten.scaled_dot_product_attention.default, check=_sdpa_check)
def _sdpa(ctx, node):
    return _attention(ctx, node)


def _attention(ctx, node):
    a = _sdpa_args(node)
    dtype = ctx.v(a["query"]).dtype
    operands = [ctx.v(a["query"]), ctx.v(a["key"]), ctx.v(a["value"])]
    mask = a.get("attn_mask")
    if mask is not None:
        m = ctx.v(mask)
        operands.append(m if m.dtype == "bool" else ctx.cast(m, dtype))
    scale = a.get("scale")
    return ctx.op("attention", operands, causal=int(bool(a.get("is_causal", False))),
                  scale=float(scale) if scale is not None else 0.0)


def _mha_check(node):
    names = ["query", "key", "value", "embed_dim", "num_head", "qkv_weight", "qkv_bias", "proj_weight",
             "proj_bias", "mask", "need_weights", "average_attn_weights", "mask_type"]
    a = dict(zip(names, node.args))
    a.update(node.kwargs)
    if not (a["query"] is a["key"] is a["value"]):
        return "multi-head attention whose query, key and value differ (only self-attention is lowered)"
    if a.get("mask") is not None:
        return "multi-head attention with a mask"
    if meta_val(a["query"]).dim() != 3:
        return "multi-head attention on unbatched input"
    for user in node.users:
        if user.args[1] != 0:
            return "multi-head attention whose weights are used"
    return None


# torch.nn.MultiheadAttention's inference fast path (torchvision's ViT takes it): self-attention
# with packed q/k/v projections, as matmuls, the attention op and the output projection.
@lowers(torch.ops.aten._native_multi_head_attention.default, check=_mha_check, outputs={0})
def _native_mha(ctx, node):
    x, _k, _v, embed_dim, heads, w_qkv, b_qkv, w_out, b_out = node.args[:9]
    b, t, e = [ctx.dim(d) for d in meta_val(x).shape]
    d = int(embed_dim) // int(heads)
    qkv = ctx.op("add", [ctx.op("matmul", [ctx.v(x), ctx.op("permute", [ctx.v(w_qkv)], perm=[1, 0])]), ctx.v(b_qkv)])
    qkv = ctx.op("permute", [ctx.reshape(qkv, [b, t, 3, int(heads), d])], perm=[2, 0, 3, 1, 4])
    q, k, v = (ctx.reshape(p, [b, int(heads), t, d]) for p in ctx.op_multi("split", [qkv], axis=0, sizes=[1, 1, 1]))
    y = ctx.op("attention", [q, k, v])
    y = ctx.reshape(ctx.op("permute", [y], perm=[0, 2, 1, 3]), [b, t, e])
    out = ctx.op("add", [ctx.op("matmul", [y, ctx.op("permute", [ctx.v(w_out)], perm=[1, 0])]), ctx.v(b_out)])
    return [out, None]

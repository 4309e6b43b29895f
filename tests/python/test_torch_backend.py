"""torch.compile(backend="kiln") on functions and small modules: results vs eager in f32/f16/bf16 at
odd sizes, unsupported ops falling back (and reported with the source line), one compile for ten
sequence lengths, the check option catching a wrong lowering, attention kept whole, and the
on-disk cache across processes."""
import subprocess
import sys
import textwrap

import pytest

from torch_helpers import assert_close, assert_varies, fresh, torch

import kiln


def mixed_ops(x, w, idx):
    h = torch.nn.functional.gelu(x @ w) * torch.sigmoid(x[..., :1]) - x.mean(dim=-1, keepdim=True)
    h = torch.where(h > 0.1, h, h * 0.5).clamp(-3.0, 3.0)
    e = torch.nn.functional.embedding(idx, w.t())
    return torch.softmax(h, dim=-1) + e.sum(dim=1, keepdim=True)[..., : h.shape[-1]], h.amax(dim=0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_function_matches_eager(dtype):
    fresh()
    g = torch.Generator().manual_seed(1)
    x = torch.randn(7, 13, generator=g).to(dtype)
    w = torch.randn(13, 13, generator=g).to(dtype)
    idx = torch.randint(0, 13, (7, 3), generator=g)
    compiled = torch.compile(mixed_ops, backend="kiln")
    got, want = compiled(x, w, idx), mixed_ops(x, w, idx)
    for a, b in zip(got, want):
        assert a.dtype == dtype
        tol = None if dtype == torch.float32 else dict(rtol=3e-2, atol=3e-2)
        assert_close(a, b, tol)
        assert_varies(a)
    import kiln.torch_backend as kt
    assert kt.STATS["partitions"] >= 1 and kt.STATS["fallback_partitions"] == 0


class MLPWithUnsupportedOp(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(11, 19)
        self.fc2 = torch.nn.Linear(19, 5)

    def forward(self, x):
        h = torch.relu(self.fc1(x))
        h = torch.special.bessel_j0(h)  # no Kiln lowering: runs in torch
        return self.fc2(h).softmax(-1)


def test_unsupported_op_falls_back_and_is_reported():
    fresh()
    torch.manual_seed(0)
    m = MLPWithUnsupportedOp().eval()
    x = torch.randn(6, 11)
    with torch.no_grad():
        got = torch.compile(m, backend="kiln")(x)
        want = m(x)
    assert_close(got, want)
    assert_varies(got)
    report = kiln.explain_torch(m, x)
    text = str(report)
    assert any("bessel_j0" in op for op, _ in report.torch_ops), text
    assert "no Kiln lowering" in text and "torch.special.bessel_j0(h)" in text, text
    assert len(report.kiln_partitions) == 2, text  # fc1+relu before it, fc2+softmax after it
    assert all(p.compile_stats for p in report.kiln_partitions)


def test_unsupported_op_without_fallback_names_op_and_source_line():
    fresh()
    m = MLPWithUnsupportedOp().eval()
    compiled = kiln.compile(m, options={"fallback": False})
    with pytest.raises(kiln.UnsupportedOpError) as info, torch.no_grad():
        compiled(torch.randn(2, 11))
    err = info.value
    assert "bessel_j0" in err.op and "bessel_j0" in str(err)
    assert "torch.special.bessel_j0(h)" in err.source_line, err.source_line


class TinyAttention(torch.nn.Module):
    def __init__(self, d=32, heads=4):
        super().__init__()
        self.qkv = torch.nn.Linear(d, 3 * d)
        self.out = torch.nn.Linear(d, d)
        self.heads = heads

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        y = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.out(y.transpose(1, 2).reshape(b, t, d))


def test_dynamic_sequence_length_compiles_once_and_keeps_attention_whole():
    kt = fresh()
    torch.manual_seed(0)
    m = TinyAttention().eval()
    compiled = torch.compile(m, backend="kiln", dynamic=True)
    with torch.no_grad():
        for t in [3, 4, 5, 7, 8, 11, 13, 16, 19, 23]:
            x = torch.randn(2, t, 32)
            got = compiled(x)
            assert_close(got, m(x))
            assert_varies(got)
    assert kt.STATS["graphs"] == 1, kt.STATS
    assert kt.STATS["kiln_compiles"] == kt.STATS["partitions"] >= 1, kt.STATS
    kiln_ops = {op for p in kt.REPORTS[0].partitions for op in p.kiln_ops}
    assert "attention" in kiln_ops, kiln_ops
    assert any("s" in str(shape) for p in kt.REPORTS[0].partitions for shape in p.inputs)


def test_mark_dynamic_one_compile():
    kt = fresh()
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.GELU(), torch.nn.LayerNorm(8)).eval()
    compiled = torch.compile(m, backend="kiln")
    with torch.no_grad():
        for n in range(2, 12):
            x = torch.randn(n, 8)
            torch._dynamo.mark_dynamic(x, 0)
            assert_close(compiled(x), m(x))
    assert kt.STATS["graphs"] == 1 and kt.STATS["kiln_compiles"] == 1, kt.STATS


def test_check_option_catches_a_wrong_lowering(monkeypatch):
    fresh()
    from kiln.torch_backend import lowering
    entry = lowering.LOWERINGS[torch.ops.aten.tanh.default]
    f = lambda x: torch.tanh(x) * 2  # noqa: E731
    x = torch.randn(5, 3)
    assert_close(kiln.compile(f, options={"check": True})(x), f(x))  # right lowering: check passes
    fresh()
    monkeypatch.setattr(entry, "fn", lambda ctx, node: ctx.op("sigmoid", [ctx.v(node.args[0])]))
    with pytest.raises(kiln.Error, match="differs from eager"):
        kiln.compile(f, options={"check": True})(x)


def test_bad_input_dtype_to_a_session_from_torch():
    fresh()
    f = lambda a, b: a @ b  # noqa: E731
    with pytest.raises(Exception):  # torch itself rejects the mismatched matmul before Kiln runs
        torch.compile(f, backend="kiln")(torch.randn(2, 3), torch.randn(4, 2))


def test_compiled_kernels_are_cached_on_disk_across_processes(tmp_path):
    script = textwrap.dedent("""
        import torch, kiln, kiln.torch_backend as kt
        f = lambda x: torch.tanh(x * 3.5 + 1.25).sum(-1)
        torch.compile(f, backend="kiln")(torch.randn(4, 9))
        print(all(p.compile_stats["cache_hit"] for p in kt.REPORTS[0].partitions))
    """)
    env = {**__import__("os").environ, "KILN_CACHE_DIR": str(tmp_path / "cache")}
    first = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env)
    second = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env)
    assert first.returncode == 0 and second.returncode == 0, first.stderr + second.stderr
    assert first.stdout.strip() == "False" and second.stdout.strip() == "True"


def test_training_step_gradients_match_eager():
    kt = fresh()
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(7, 16), torch.nn.GELU(), torch.nn.Linear(16, 3))
    x = torch.randn(5, 7)
    torch.compile(m, backend="kiln")(x).square().sum().backward()
    got = [p.grad.clone() for p in m.parameters()]
    m.zero_grad()
    m(x).square().sum().backward()
    for a, b in zip(got, [p.grad for p in m.parameters()]):
        assert_close(a, b)
        assert_varies(a)
    assert kt.STATS["graphs"] == 2  # forward and backward, each partitioned
    assert any("gelu_backward" in n.op for r in kt.REPORTS for n in r.torch_nodes)


def test_freeze_bakes_parameters_into_the_compiled_code():
    kt = fresh()
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Conv2d(3, 5, 3), torch.nn.ReLU(), torch.nn.Flatten(),
                            torch.nn.Linear(5 * 5 * 7, 4)).eval()
    x = torch.randn(2, 3, 7, 9)
    with torch.no_grad():
        got = kiln.compile(m, options={"freeze": True})(x)
        want = m(x)
    assert_close(got, want)
    assert_varies(got)
    parts = [p for r in kt.REPORTS for p in r.partitions]
    assert len(parts) == 1 and parts[0].inputs == ["f32[2, 3, 7, 9]"], parts  # weights are not inputs
    kt = fresh()
    with torch.no_grad():
        kiln.compile(m)(x)  # the default under no_grad: frozen too
    assert [p for r in kt.REPORTS for p in r.partitions][0].inputs == ["f32[2, 3, 7, 9]"]
    kt = fresh()
    with torch.no_grad():
        kiln.compile(m, options={"freeze": False})(x)
    assert len([p for r in kt.REPORTS for p in r.partitions][0].inputs) == 5  # x and 4 weights
    kt = fresh()
    kiln.compile(m)(x)  # grad enabled: weights stay inputs (they may be trained)
    assert len([p for r in kt.REPORTS for p in r.partitions][0].inputs) == 5


def _conv_bn_net(seed=3):
    """conv -> batch norm (random statistics: the library's init makes it an identity) -> relu ->
    1x1 conv -> linear."""
    g = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    m = torch.nn.Sequential(torch.nn.Conv2d(3, 6, 3, padding=1), torch.nn.BatchNorm2d(6), torch.nn.ReLU(),
                            torch.nn.Conv2d(6, 4, 1), torch.nn.Flatten(), torch.nn.Linear(4 * 5 * 7, 3))
    with torch.no_grad():
        m[1].running_mean.copy_(torch.randn(6, generator=g) * 0.3)
        m[1].running_var.copy_(torch.rand(6, generator=g) + 0.5)
        m[1].weight.copy_(torch.rand(6, generator=g) + 0.5)
        m[1].bias.copy_(torch.randn(6, generator=g) * 0.3)
    return m.eval()


def test_frozen_weights_follow_in_place_updates_and_new_state_dicts():
    """Frozen parameters and buffers (batch norm statistics) are guarded: after load_state_dict or an
    in-place write the next call compiles again with the new values, once, and matches eager."""
    kt = fresh()
    m = _conv_bn_net()
    x = torch.randn(2, 3, 5, 7)
    with torch.no_grad():
        fn = kiln.compile(m)
        assert_close(fn(x), m(x))
        parts = [p for r in kt.REPORTS for p in r.partitions]
        assert parts[0].inputs == ["f32[2, 3, 5, 7]"], parts  # parameters and running statistics baked in
        compiles = kt.STATS["kiln_compiles"]
        m.load_state_dict(_conv_bn_net(seed=4).state_dict())
        got, want = fn(x), m(x)
        assert_close(got, want)
        assert_varies(got)
        assert kt.STATS["refreezes"] == 1 and kt.STATS["kiln_compiles"] == compiles + 1
        assert_close(fn(x), want)  # unchanged weights: no further compile
        assert kt.STATS["refreezes"] == 1
        m[1].running_var.mul_(3.0)  # one buffer written in place
        assert_close(fn(x), m(x))
        m[5].weight.data = torch.randn(3, 4 * 5 * 7)  # a new storage behind the same Parameter
        assert_close(fn(x), m(x))
        assert kt.STATS["refreezes"] == 3


def test_batch_norm_in_train_mode_under_no_grad_updates_running_statistics():
    """A graph that writes a buffer in place (train-mode batch norm) keeps that buffer an input."""
    fresh()
    m, ref = _conv_bn_net().train(), _conv_bn_net().train()
    x = torch.randn(4, 3, 5, 7)
    with torch.no_grad():
        got, want = kiln.compile(m)(x), ref(x)
    assert_close(got, want)
    assert_close(m[1].running_mean, ref[1].running_mean)
    assert_close(m[1].running_var, ref[1].running_var)
    assert not torch.equal(m[1].running_mean, _conv_bn_net()[1].running_mean)  # it was updated


def test_rank_zero_tensors_keep_their_shape():
    """A 0-d tensor and Python scalars in ATen arithmetic stay 0-d (they came back as shape (1,))."""
    fresh()
    t = torch.tensor(2.5)
    got = torch.compile(lambda a: a * 3 + 1, backend="kiln")(t)
    assert got.shape == () and float(got) == 8.5

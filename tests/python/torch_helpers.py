"""Helpers for the torch tests: skip cleanly without torch, compare with eager at the dtype's
tolerance, and insist that outputs vary (a constant output checks nothing)."""
import pytest

torch = pytest.importorskip("torch", reason="torch is not installed (KILN_SKIP_TORCH=1?): "
                                            "the torch.compile backend tests are skipped")

TOL = {torch.float32: dict(rtol=1e-4, atol=1e-4), torch.float16: dict(rtol=1e-2, atol=1e-2),
       torch.bfloat16: dict(rtol=2e-2, atol=2e-2), torch.float64: dict(rtol=1e-7, atol=1e-7)}


def assert_close(got, want, tol=None):
    kw = tol or TOL.get(want.dtype, dict(rtol=0, atol=0))
    torch.testing.assert_close(got, want, **kw)


def assert_varies(t):
    """The output is not constant: a model whose random-weight output is constant checks nothing."""
    t = t.float()
    assert t.numel() > 1 and float(t.std()) > 1e-6 * (1 + float(t.abs().max())), "output is constant"


def fresh():
    """A clean Dynamo cache and kiln stats, so compile counts are per test."""
    import kiln.torch_backend as kt
    torch._dynamo.reset()
    for k in kt.STATS:
        kt.STATS[k] = 0
    kt.REPORTS.clear()
    return kt

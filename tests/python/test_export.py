"""torch.export path: kiln.compile_exported against eager, saved as `kiln compile`'s artefact and
loaded back from Python and from the C++ CLI (no Python at run time)."""
import os
import subprocess

import numpy as np
import pytest

from conftest import kiln_cli
from torch_helpers import assert_close, assert_varies, torch

import kiln


class ConvNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.bn = torch.nn.BatchNorm2d(8)
        self.fc = torch.nn.Linear(8, 5)

    def forward(self, x):
        h = torch.relu(self.bn(self.conv(x)))
        return self.fc(h.mean(dim=(2, 3))).softmax(-1)


def exported():
    torch.manual_seed(0)
    m = ConvNet().eval()
    with torch.no_grad():
        m.bn.running_mean.uniform_(-0.5, 0.5)
        m.bn.running_var.uniform_(0.5, 1.5)
    return m, torch.export.export(m, (torch.randn(2, 3, 9, 11),))


def test_compile_exported_matches_eager():
    m, ep = exported()
    compiled = kiln.compile_exported(ep)
    x = torch.randn(2, 3, 9, 11)
    got = compiled(x)
    with torch.no_grad():
        want = m(x)
    assert isinstance(got, torch.Tensor)
    assert_close(got, want, dict(rtol=1e-4, atol=1e-5))
    assert_varies(got)
    assert compiled.graph.inputs[0].shape == [2, 3, 9, 11]  # weights are constants, x the only input


def test_exported_dynamic_batch():
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(6, 10), torch.nn.Tanh(), torch.nn.Linear(10, 3)).eval()
    batch = torch.export.Dim("batch", min=2, max=64)
    ep = torch.export.export(m, (torch.randn(4, 6),), dynamic_shapes=({0: batch},))
    compiled = kiln.compile_exported(ep)
    assert isinstance(compiled.graph.inputs[0].shape[0], str)
    for n in (2, 5, 31):
        x = torch.randn(n, 6)
        with torch.no_grad():
            assert_close(compiled(x), m(x))


def test_exported_artefact_runs_without_python(tmp_path):
    m, ep = exported()
    compiled = kiln.compile_exported(ep)
    out = tmp_path / "artefact"
    compiled.save(out)
    x = np.random.default_rng(3).standard_normal((2, 3, 9, 11)).astype(np.float32)
    with torch.no_grad():
        want = m(torch.from_numpy(x)).numpy()
    sess = kiln.load_compiled(out)
    got, = sess.run(None, {sess.inputs[0].name: x})
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    cli = kiln_cli()
    if cli is None:
        pytest.skip("build/kiln not built: the C++ side of the artefact round trip is not checked")
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "y.npy", want)
    out_name = sess.outputs[0].name
    r = subprocess.run([cli, "run", str(out), "--input", f"{sess.inputs[0].name}={tmp_path / 'x.npy'}",
                        "--expect", f"{out_name}={tmp_path / 'y.npy'}"], capture_output=True, text=True,
                       env={**os.environ})
    assert r.returncode == 0, r.stdout + r.stderr


def test_unsupported_op_in_export_names_op():
    class M(torch.nn.Module):
        def forward(self, x):
            return torch.special.bessel_j0(x) + 1

    ep = torch.export.export(M(), (torch.randn(3),))
    with pytest.raises(kiln.UnsupportedOpError, match="bessel_j0"):
        kiln.compile_exported(ep)


def test_exported_graph_names_its_inputs_and_outputs():
    _, ep = exported()
    compiled = kiln.compile_exported(ep)
    assert [v.name for v in compiled.graph.inputs] == ["x"]
    assert all(v.name for v in compiled.graph.outputs)

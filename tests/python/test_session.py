"""kiln.load: ONNX models built in-test with the onnx package (random weights), run through the
ONNX Runtime-shaped session and compared with numpy; every bad-input error names what is wrong."""
import os
import subprocess

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import kiln
from conftest import kiln_cli, random_array


def mlp_model(path, rng, d_in=13, d_hidden=29, d_out=5):
    """y = softmax(relu(x @ W1 + b1) @ W2 + b2), batch dim 'N'; also returns the weights."""
    w1, b1 = random_array(rng, (d_in, d_hidden), lo=-0.5, hi=0.5), random_array(rng, (d_hidden,))
    w2, b2 = random_array(rng, (d_hidden, d_out), lo=-0.5, hi=0.5), random_array(rng, (d_out,))
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["h0"]), helper.make_node("Add", ["h0", "b1"], ["h1"]),
             helper.make_node("Relu", ["h1"], ["h"]), helper.make_node("MatMul", ["h", "w2"], ["l0"]),
             helper.make_node("Add", ["l0", "b2"], ["logits"]),
             helper.make_node("Softmax", ["logits"], ["probs"], axis=-1)]
    graph = helper.make_graph(
        nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", d_in])],
        [helper.make_tensor_value_info("probs", TensorProto.FLOAT, ["N", d_out]),
         helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["N", d_out])],
        [numpy_helper.from_array(a, n) for a, n in [(w1, "w1"), (b1, "b1"), (w2, "w2"), (b2, "b2")]])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return w1, b1, w2, b2


def mlp_reference(x, w1, b1, w2, b2):
    x = x.astype(np.float64)
    logits = np.maximum(x @ w1 + b1, 0) @ w2 + b2
    e = np.exp(logits - logits.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True), logits


@pytest.fixture
def mlp(tmp_path, rng):
    path = str(tmp_path / "mlp.onnx")
    weights = mlp_model(path, rng)
    return kiln.load(path), weights, path


def test_session_inputs_outputs(mlp):
    sess, _, _ = mlp
    assert [(i.name, i.dtype, i.shape) for i in sess.inputs] == [("x", "float32", ["N", 13])]
    assert [(o.name, o.dtype, o.shape) for o in sess.get_outputs()] == [("probs", "float32", ["N", 5]),
                                                                       ("logits", "float32", ["N", 5])]


@pytest.mark.parametrize("n", [1, 3, 17])
def test_mlp_matches_numpy_for_every_batch_size(mlp, rng, n):
    sess, weights, _ = mlp
    x = random_array(rng, (n, 13))
    probs, logits = sess.run(None, {"x": x})
    want_p, want_l = mlp_reference(x, *weights)
    np.testing.assert_allclose(logits, want_l, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(probs, want_p, rtol=1e-4, atol=1e-5)
    assert logits.std() > 0.1
    only, = sess.run(["logits"], {"x": x})
    np.testing.assert_array_equal(only, logits)


def test_gather_with_int64_indices_and_f16(tmp_path, rng):
    table = random_array(rng, (10, 3), "float16")
    nodes = [helper.make_node("Gather", ["table", "ids"], ["rows"], axis=0),
             helper.make_node("Mul", ["rows", "rows"], ["sq"])]
    graph = helper.make_graph(nodes, "emb", [helper.make_tensor_value_info("ids", TensorProto.INT64, ["B", "T"])],
                              [helper.make_tensor_value_info("sq", TensorProto.FLOAT16, ["B", "T", 3])],
                              [numpy_helper.from_array(table, "table")])
    path = str(tmp_path / "emb.onnx")
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    sess = kiln.load(path)
    ids = rng.integers(0, 10, (2, 7)).astype(np.int64)
    sq, = sess.run(None, {"ids": ids})
    assert sq.dtype == np.float16 and sq.shape == (2, 7, 3)
    np.testing.assert_allclose(sq.astype(np.float32), (table[ids] * table[ids]).astype(np.float32), rtol=1e-3)


def test_torch_tensors_in_give_torch_tensors_out(mlp, rng):
    torch = pytest.importorskip("torch", reason="torch is not installed: torch-in/torch-out not checked")
    sess, weights, _ = mlp
    x = random_array(rng, (4, 13))
    probs, logits = sess.run(None, {"x": torch.from_numpy(x)})
    assert isinstance(logits, torch.Tensor) and logits.dtype == torch.float32
    np.testing.assert_allclose(logits.numpy(), mlp_reference(x, *weights)[1], rtol=1e-4, atol=1e-4)


def test_bad_feeds_name_the_input_and_dimension(mlp):
    sess, _, _ = mlp
    x = np.ones((2, 13), np.float32)
    with pytest.raises(kiln.Error, match=r"input 'x': expected float32 \(f32\), got int64"):
        sess.run(None, {"x": x.astype(np.int64)})
    with pytest.raises(kiln.Error, match=r"input 'x' dimension 1: expected 13, got 12"):
        sess.run(None, {"x": np.ones((2, 12), np.float32)})
    with pytest.raises(kiln.Error, match=r"input 'x': expected rank 2"):
        sess.run(None, {"x": np.ones((13,), np.float32)})
    with pytest.raises(kiln.Error, match=r"missing input 'x'"):
        sess.run(None, {})
    with pytest.raises(kiln.Error, match=r"unknown input 'y'"):
        sess.run(None, {"x": x, "y": x})
    with pytest.raises(kiln.Error, match=r"unknown output 'nope'"):
        sess.run(["nope"], {"x": x})


def test_inconsistent_symbolic_dims_are_named(tmp_path):
    nodes = [helper.make_node("Add", ["a", "b"], ["c"])]
    graph = helper.make_graph(nodes, "add", [helper.make_tensor_value_info("a", TensorProto.FLOAT, ["B", 4]),
                                             helper.make_tensor_value_info("b", TensorProto.FLOAT, ["B", 4])],
                              [helper.make_tensor_value_info("c", TensorProto.FLOAT, ["B", 4])])
    path = str(tmp_path / "add.onnx")
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    sess = kiln.load(path)
    with pytest.raises(kiln.Error, match=r"input 'b' dimension 0 \('B'\): got 3, but input 'a' gave B = 2"):
        sess.run(None, {"a": np.ones((2, 4), np.float32), "b": np.ones((3, 4), np.float32)})


def test_missing_file_and_unsupported_op(tmp_path):
    missing = str(tmp_path / "nope.onnx")
    with pytest.raises(kiln.Error, match="nope.onnx"):
        kiln.load(missing)
    node = helper.make_node("FancyOp", ["x"], ["y"], domain="com.example")
    graph = helper.make_graph([node], "custom", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    path = str(tmp_path / "custom.onnx")
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.example", 1)])
    onnx.save(model, path)
    with pytest.raises(kiln.UnsupportedOpError, match="FancyOp"):
        kiln.load(path)
    garbage = tmp_path / "garbage.onnx"
    garbage.write_bytes(b"not a model")
    with pytest.raises(kiln.Error, match="garbage.onnx"):
        kiln.load(str(garbage))


def test_explain_text_and_dict(mlp):
    sess, _, _ = mlp
    text = sess.explain(dims={"N": 4}, repeats=1)
    assert "fusion decisions" in text and "matmul" in text
    report = sess.explain(dims={"N": 4}, repeats=1, format="dict")
    assert report["kernels"] and all("bytes_read" in k for k in report["kernels"])
    assert "fused" in sess.explain(format="fusion").lower()


def test_saved_artefact_loads_in_python_and_in_the_cpp_cli(mlp, rng, tmp_path):
    sess, weights, _ = mlp
    out_dir = tmp_path / "artefact"
    sess.save(out_dir)
    assert (out_dir / "manifest.json").exists() and (out_dir / "kernels.so").exists()
    x = random_array(rng, (3, 13))
    loaded = kiln.load_compiled(out_dir)
    probs, logits = loaded.run(None, {"x": x})
    np.testing.assert_allclose(logits, mlp_reference(x, *weights)[1], rtol=1e-4, atol=1e-4)
    cli = kiln_cli()
    if cli is None:
        pytest.skip("build/kiln not built: the C++ side of the artefact round trip is not checked")
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "logits.npy", mlp_reference(x, *weights)[1].astype(np.float32))
    r = subprocess.run([cli, "run", str(out_dir), "--input", f"x={tmp_path / 'x.npy'}",
                        "--expect", f"logits={tmp_path / 'logits.npy'}"], capture_output=True, text=True,
                       env={**os.environ})
    assert r.returncode == 0, r.stdout + r.stderr


def test_cuda_device_without_a_gpu_says_why(mlp):
    if not kiln._kiln.cuda_unavailable_reason():
        pytest.skip("a GPU is present: the CUDA path is exercised by scripts/gpu-run, not here")
    _, _, path = mlp
    with pytest.raises(kiln.Error, match="cuda"):
        kiln.load(path, device="cuda")
    with pytest.raises(kiln.Error, match="cuda"):
        kiln.compile(lambda x: x, device="cuda")
    with pytest.raises(kiln.Error, match="device"):
        kiln.load(path, device="tpu")


@pytest.mark.parametrize("dynamo", [False, True])
def test_torch_sort_exported_with_dynamic_axes_runs_as_sort(tmp_path, dynamo):
    """Both PyTorch exporters write torch.sort / argsort over a dynamic axis as TopK with
    k = Shape(x)[axis]; Kiln imports that as its stable sort, and every size agrees with torch
    (values exactly; indices exactly, ties included, against torch's stable=True, since Kiln's sort
    is stable; the exporters only take the default, unstable form)."""
    torch = pytest.importorskip("torch")
    if dynamo:
        pytest.importorskip("onnxscript", reason="torch.onnx's dynamo exporter needs onnxscript (scripts/requirements-torch.txt)")

    class Sorts(torch.nn.Module):
        def forward(self, x):
            v, i = torch.sort(x, dim=-1, descending=True)
            return v, i, torch.argsort(x, dim=0)

    path = str(tmp_path / f"sort-{'dynamo' if dynamo else 'legacy'}.onnx")
    x0 = torch.randn(3, 7)
    if dynamo:
        dims = {"x": {0: torch.export.Dim("B", min=2), 1: torch.export.Dim("N", min=2)}}
        torch.onnx.export(Sorts(), (x0,), path, dynamo=True, dynamic_shapes=dims)
    else:
        torch.onnx.export(Sorts(), (x0,), path, dynamo=False, input_names=["x"], opset_version=17,
                          dynamic_axes={"x": {0: "B", 1: "N"}})
    session = kiln.load(path)
    name = session.inputs[0].name
    for b, n in [(3, 7), (5, 41), (2, 300)]:
        x = torch.round(torch.randn(b, n) * 3) / 3  # ties
        got = session.run(None, {name: x.numpy()})
        v, i = torch.sort(x, dim=-1, descending=True, stable=True)
        np.testing.assert_array_equal(got[0], v.numpy())
        np.testing.assert_array_equal(got[1], i.numpy())
        np.testing.assert_array_equal(got[2], torch.argsort(x, dim=0, stable=True).numpy())

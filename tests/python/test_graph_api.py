"""The extension's graph builder, compiler and runner against numpy (computed independently) and the
reference interpreter, in several dtypes and odd sizes; zero-copy in and out; errors."""
import numpy as np
import pytest

import kiln
from kiln import _kiln, arrays
from conftest import random_array


def build(dtype, shape):
    """y = relu(a * b + a) - b / 3 over symbolic leading dim N; z = reduce_sum(y, axis 1)."""
    g = _kiln.Graph("chain")
    a = g.input("a", dtype, shape)
    b = g.input("b", dtype, shape)
    ab = g.node("mul", [a, b])[0]
    s = g.node("add", [ab, a])[0]
    r = g.node("relu", [s])[0]
    three = g.constant(np.array(3, dtype=arrays.KILN_TO_NUMPY[dtype]), dtype)
    y = g.node("sub", [r, g.node("div", [b, three])[0]])[0]
    z = g.node("reduce_sum", [y], {"axes": [1], "keepdim": 0})[0]
    g.set_outputs([y, z])
    return g


def expected(a, b):
    y = np.maximum(a * b + a, 0) - b / a.dtype.type(3)
    return y, y.sum(axis=1)


@pytest.mark.parametrize("dtype,tol", [("f32", 1e-5), ("f64", 1e-12), ("f16", 2e-2)])
@pytest.mark.parametrize("n", [1, 7, 33])
def test_compiled_chain_matches_numpy_and_interpreter(rng, dtype, tol, n):
    g = build(dtype, ["N", 13])
    exe = _kiln.compile(g, "cpu")
    np_dtype = arrays.KILN_TO_NUMPY[dtype]
    a, b = random_array(rng, (n, 13), np_dtype), random_array(rng, (n, 13), np_dtype)
    (y, yd), (z, zd) = exe.run([a, b], [dtype, dtype])
    assert (yd, zd) == (dtype, dtype)
    ey, ez = expected(a.astype(np.float64), b.astype(np.float64))
    np.testing.assert_allclose(y.astype(np.float64), ey, rtol=tol, atol=tol)
    np.testing.assert_allclose(z.astype(np.float64), ez, rtol=tol, atol=tol * 13)
    (iy, _), (iz, _) = g.interpret([a, b], [dtype, dtype])
    np.testing.assert_allclose(y.astype(np.float64), iy.astype(np.float64), rtol=tol, atol=tol)
    assert np.std(y) > 0


@pytest.mark.parametrize("dtype", ["i64", "i32"])
def test_integer_gather_and_arithmetic(rng, dtype):
    g = _kiln.Graph("ints")
    table = g.input("table", dtype, [11, 5])
    idx = g.input("idx", "i64", ["B", 3])
    rows = g.node("gather", [table, idx], {"axis": 0})[0]
    out = g.node("mul", [rows, rows])[0]
    g.set_outputs([out])
    np_dtype = arrays.KILN_TO_NUMPY[dtype]
    t = rng.integers(-50, 50, (11, 5)).astype(np_dtype)
    i = rng.integers(0, 11, (4, 3)).astype(np.int64)
    (y, d), = _kiln.compile(g).run([t, i], [dtype, "i64"])
    assert d == dtype
    np.testing.assert_array_equal(y, t[i] * t[i])


def test_bool_comparison_output(rng):
    g = _kiln.Graph("cmp")
    a = g.input("a", "f32", [5, 3])
    b = g.input("b", "f32", [3])
    g.set_outputs([g.node("lt", [a, b])[0]])
    x, y = random_array(rng, (5, 3)), random_array(rng, (3,))
    (out, d), = _kiln.compile(g).run([x, y], ["f32", "f32"])
    assert d == "bool" and out.dtype == np.bool_
    np.testing.assert_array_equal(out, x < y)


def test_inputs_are_read_in_place_and_outputs_are_not_copied(rng):
    x = random_array(rng, (6, 7))
    # Input side: the tensor Kiln runs on reads the caller's buffer (no copy).
    assert _kiln._borrowed_address(x, "f32") == x.ctypes.data
    # Output side: the array handed back views Kiln's buffer (numpy did not copy it).
    g = _kiln.Graph("neg")
    v = g.input("x", "f32", [6, 7])
    g.set_outputs([g.node("neg", [v])[0]])
    before = x.copy()
    (y, _), = _kiln.compile(g).run([x], ["f32"])
    assert not y.flags.owndata and y.base is not None
    np.testing.assert_array_equal(y, -x)
    np.testing.assert_array_equal(x, before)  # the input was not written


def test_output_that_is_a_view_of_an_input_does_not_share_the_callers_buffer(rng):
    g = _kiln.Graph("view")
    v = g.input("x", "f32", [4, 6])
    g.set_outputs([g.node("reshape", [v], {"shape": [24]})[0]])
    x = random_array(rng, (4, 6))
    (y, _), = _kiln.compile(g).run([x], ["f32"])
    np.testing.assert_array_equal(y, x.reshape(24))
    y[0] = 1234.0
    assert x[0, 0] != 1234.0


def test_symbolic_shapes_are_reported_as_strings():
    g = build("f32", ["N", 13])
    assert g.inputs[0].shape == ["N", 13]
    assert g.outputs[1].shape == ["N"]
    assert "reduce_sum" in g.text()


def test_ill_typed_node_raises_kiln_error_naming_the_op():
    g = _kiln.Graph("bad")
    a = g.input("a", "f32", [3])
    b = g.input("b", "i64", [3])
    with pytest.raises(kiln.Error, match="add"):
        g.node("add", [a, b], name="my_add")


def test_unknown_op_and_attribute_are_named():
    g = _kiln.Graph("bad")
    a = g.input("a", "f32", [3])
    with pytest.raises(kiln.Error, match="no op named 'frobnicate'"):
        g.node("frobnicate", [a])
    with pytest.raises(kiln.Error, match="has no attribute 'axiz'"):
        g.node("softmax", [a], {"axiz": 0})
    with pytest.raises(kiln.Error, match="attribute 'axis' expects int"):
        g.node("softmax", [a], {"axis": "zero"})


def test_run_with_wrong_item_size_names_the_input():
    g = _kiln.Graph("t")
    v = g.input("x", "f32", [3])
    g.set_outputs([g.node("neg", [v])[0]])
    with pytest.raises(kiln.Error, match="input 'x'"):
        _kiln.compile(g).run([np.zeros(3, np.float64) + 1.5], ["f32"])


def test_parse_text_ir_round_trip():
    g = build("f32", ["N", 13])
    text = g.text()
    assert _kiln.Graph.parse(text).text() == text


def test_inputs_at_unaligned_offsets(rng):
    # A contiguous view that starts one element into its buffer (4-byte aligned only) is read in
    # place; the compiled kernels must not assume more alignment than the element's.
    big = random_array(rng, (1 + 5 * 9,))
    x = big[1:].reshape(5, 9)
    assert x.flags.c_contiguous and x.ctypes.data % 8 != 0 or x.ctypes.data % 64 != 0
    g = _kiln.Graph("unaligned")
    v = g.input("x", "f32", [5, 9])
    s = g.node("reduce_sum", [g.node("exp", [v])[0]], {"axes": [1], "keepdim": 1})[0]
    g.set_outputs([g.node("div", [g.node("exp", [v])[0], s])[0]])
    (y, _), = _kiln.compile(g).run([x], ["f32"])
    e = np.exp(x.astype(np.float64))
    np.testing.assert_allclose(y, e / e.sum(axis=1, keepdims=True), rtol=1e-5)


def test_torch_tensors_cross_without_copies(rng):
    torch = pytest.importorskip("torch", reason="torch is not installed: torch zero-copy not checked")
    for dtype, kiln_dtype in [(torch.float32, "f32"), (torch.bfloat16, "bf16"), (torch.int64, "i64")]:
        t = torch.arange(30).reshape(5, 6).to(dtype)
        array, d = arrays.from_torch(t)
        assert d == kiln_dtype
        assert _kiln._borrowed_address(array, d) == t.data_ptr()  # the buffer Kiln reads is torch's
    g = _kiln.Graph("neg")
    v = g.input("x", "bf16", [4, 3])
    g.set_outputs([g.node("neg", [v])[0]])
    x = torch.randn(4, 3).to(torch.bfloat16)
    (out, d), = _kiln.compile(g).run([arrays.from_torch(x)[0]], ["bf16"])
    y = arrays.to_torch(out, d)
    assert y.dtype == torch.bfloat16 and y.data_ptr() == out.ctypes.data  # a view of Kiln's result
    assert torch.equal(y, -x)

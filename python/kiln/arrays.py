"""numpy / torch values to and from the extension's (array, kiln dtype) pairs, without copies.

Why: the extension sees only C-contiguous numpy arrays; torch tensors and numpy arrays are viewed
as such (bf16 as its 16-bit pattern) and results come back as views of Kiln's buffers.
"""
import sys

import numpy as np

from kiln._kiln import Error

# numpy dtype name -> Kiln dtype name, and back.
NUMPY_TO_KILN = {
    "float32": "f32", "float64": "f64", "float16": "f16", "int8": "i8", "int16": "i16",
    "int32": "i32", "int64": "i64", "uint8": "u8", "uint16": "u16", "uint32": "u32",
    "uint64": "u64", "bool": "bool", "bfloat16": "bf16",  # bfloat16: ml_dtypes' numpy type
}
KILN_TO_NUMPY = {v: k for k, v in NUMPY_TO_KILN.items()}

TORCH_TO_KILN = {
    "torch.float32": "f32", "torch.float64": "f64", "torch.float16": "f16", "torch.bfloat16": "bf16",
    "torch.int8": "i8", "torch.int16": "i16", "torch.int32": "i32", "torch.int64": "i64",
    "torch.uint8": "u8", "torch.bool": "bool",
}


def is_torch_tensor(x):
    """Whether x is a torch tensor, without importing torch (if torch is not loaded, it is not)."""
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(x, torch.Tensor)


def kiln_dtype_of_numpy(dtype):
    name = np.dtype(dtype).name
    if name not in NUMPY_TO_KILN:
        raise Error(f"numpy dtype {name} has no Kiln dtype")
    return NUMPY_TO_KILN[name]


def from_numpy(x, what="input"):
    """(C-contiguous array viewable by the extension, kiln dtype) for a numpy array (no copy when
    it is already C-contiguous)."""
    if not isinstance(x, np.ndarray):
        x = np.asarray(x)
    d = kiln_dtype_of_numpy(x.dtype)
    x = np.asarray(x, order="C")  # not ascontiguousarray: it turns a 0-d array into shape (1,)
    if d == "bf16":
        x = x.view(np.uint16)
    return x, d


def from_torch(t):
    """(array, kiln dtype) sharing a CPU torch tensor's memory. CUDA tensors are copied to the host
    (the Executable API takes host buffers)."""
    import torch
    d = TORCH_TO_KILN.get(str(t.dtype))
    if d is None:
        raise Error(f"torch dtype {t.dtype} has no Kiln dtype")
    t = t.detach()
    if t.device.type != "cpu":
        t = t.cpu()
    t = t.contiguous()
    if d == "bf16":
        t = t.view(torch.int16)
    return t.numpy(), d


def to_numpy(array, dtype):
    if dtype == "bf16":
        try:
            import ml_dtypes
        except ImportError:
            raise Error("a bf16 result needs ml_dtypes (pip install ml_dtypes) or a torch caller") from None
        return array.view(ml_dtypes.bfloat16)
    return array


def to_torch(array, dtype, device=None):
    import torch
    t = torch.from_numpy(array)
    if dtype == "bf16":
        t = t.view(torch.bfloat16)
    if device is not None and str(device) != "cpu":
        t = t.to(device)
    return t


def convert_in(x, what="input"):
    """Any accepted value (numpy array, torch tensor, Python scalar or list) -> (array, kiln dtype)."""
    if is_torch_tensor(x):
        return from_torch(x)
    return from_numpy(x, what)

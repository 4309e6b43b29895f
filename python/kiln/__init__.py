"""Kiln: an ML compiler and runtime (docs/python.md).

    sess = kiln.load("model.onnx")                 # ONNX Runtime-shaped session
    y, = sess.run(None, {"x": x})
    fast = torch.compile(model, backend="kiln")    # or kiln.compile(model)

Importing kiln does not import torch; the torch entry points import it when called.
"""
from kiln._kiln import Error, UnsupportedOpError
from kiln.session import Session, ValueInfo, load
from kiln.entry import compile, compile_exported, explain_torch, load_compiled

__version__ = "0.1.0"
__all__ = [
    "Error", "UnsupportedOpError", "Session", "ValueInfo", "load", "load_compiled", "compile",
    "compile_exported", "explain_torch",
]

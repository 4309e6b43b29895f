"""The entry points that may need torch, importing it only when called (import kiln stays torch-free)."""
import os

from kiln._kiln import Error


def compile(fn_or_module, device="cpu", *, dynamic=None, options=None, fullgraph=False):
    """A callable that runs `fn_or_module` through Kiln.

    A torch.nn.Module or a function of torch tensors: torch.compile with the "kiln" backend (Dynamo
    captures it, AOTAutograd lowers it to ATen, Kiln runs what it supports and torch the rest).
    `dynamic=True` compiles symbolic sizes once for every size. A path to an .onnx file: kiln.load.
    options: {"check": True} compares every compiled partition with eager torch; {"fallback": False}
    raises kiln.UnsupportedOpError instead of running unsupported ops in torch; {"threads": N}.
    """
    if isinstance(fn_or_module, (str, os.PathLike)):
        from kiln.session import load
        return load(fn_or_module, device)
    if device not in ("cpu", "cuda"):
        raise Error(f"device must be 'cpu' or 'cuda', not {device!r}")
    if device == "cuda":
        from kiln import _kiln
        reason = _kiln.cuda_unavailable_reason()
        if reason:
            raise Error(f"device='cuda': the CUDA target cannot run here: {reason}")
    try:
        import torch
    except ImportError:
        raise Error("kiln.compile of a Python callable needs torch (pip install torch); "
                    "for an ONNX file use kiln.load(path)") from None
    from kiln.torch_backend import make_backend
    compiled = torch.compile(fn_or_module, backend=make_backend(device=device, **(options or {})),
                             dynamic=dynamic, fullgraph=fullgraph)
    return _Compiled(compiled)


class _Compiled:
    """torch.compile's callable, with Kiln's own exceptions unwrapped from Dynamo's
    BackendCompilerFailed (so callers can catch kiln.UnsupportedOpError)."""

    def __init__(self, compiled):
        self._compiled = compiled

    def __call__(self, *args, **kwargs):
        from torch._dynamo.exc import BackendCompilerFailed
        try:
            return self._compiled(*args, **kwargs)
        except BackendCompilerFailed as e:
            inner = getattr(e, "inner_exception", None)
            if isinstance(inner, Error):
                raise inner from None
            raise

    def __getattr__(self, name):
        return getattr(self._compiled, name)


def compile_exported(exported_program, device="cpu", *, options=None):
    """Compiles a torch.export.ExportedProgram with Kiln; returns a callable module (see
    kiln.torch_backend.export). `.save(dir)` writes `kiln compile`'s artefact."""
    from kiln.torch_backend.export import compile_exported as impl
    return impl(exported_program, device=device, **(options or {}))


def explain_torch(model, *args, dynamic=None, **kwargs):
    """Runs `model(*args, **kwargs)` through the kiln backend and reports what ran where and why:
    per partition the ops Kiln compiled, and every op left to torch with the reason. Returns a
    kiln.torch_backend.TorchExplanation (str() is the text report)."""
    from kiln.torch_backend.explain import explain_torch as impl
    return impl(model, *args, dynamic=dynamic, **kwargs)


def load_compiled(directory, threads=0):
    """Loads a `kiln compile` artefact (also written by Session.save / CompiledExport.save) as a Session."""
    from kiln.session import load
    return load(directory, "cpu", threads=threads)

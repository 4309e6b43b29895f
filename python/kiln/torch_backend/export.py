"""kiln.compile_exported(ExportedProgram): a torch.export graph compiled by Kiln as one graph with
its weights frozen in, runnable from Python and savable as `kiln compile`'s artefact (loadable from
C++ without Python: kiln::load_compiled).

Why: deployment wants one self-contained compiled artefact; torch.export gives the whole graph
ahead of time with its parameters, so nothing needs torch at run time.
"""
import torch

from kiln import _kiln, arrays
from kiln._kiln import Error
from kiln.torch_backend.backend import _KEEP_WHOLE
from kiln.torch_backend.errors import LoweringError, unsupported_error
from kiln.torch_backend.lowering import lower_graph, support_reason


def _decompose(ep):
    table = torch.export.default_decompositions()
    for op in list(table.keys()):
        if any(k in str(op) for k in _KEEP_WHOLE):
            del table[op]
    return ep.run_decompositions(table)


class CompiledExport:
    """Call it with the exported program's user inputs (numpy arrays or torch tensors)."""

    def __init__(self, ep, device="cpu", threads=0, cache_dir=""):
        ep = _decompose(ep)
        gm = ep.graph_module
        sig = ep.graph_signature
        constants, metas = {}, []
        user_inputs = []
        placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
        for spec, node in zip(sig.input_specs, placeholders):
            metas.append(node.meta.get("val"))
            kind = spec.kind.name
            if kind in ("PARAMETER", "BUFFER"):
                constants[node.name] = ep.state_dict[spec.target] if spec.target in ep.state_dict \
                    else ep.constants[spec.target]
            elif kind == "CONSTANT_TENSOR":
                constants[node.name] = ep.constants[spec.target]
            elif kind == "USER_INPUT":
                user_inputs.append(node.name)
            else:
                raise Error(f"compile_exported: input kind {kind} ({node.name}) is not supported")
        for node in gm.graph.nodes:
            if node.op == "call_function":
                reason = support_reason(node)
                if reason:
                    raise unsupported_error(node, reason)
        try:
            self.graph, self.positions, self.structure = lower_graph(gm, "exported", metas, constants)
        except LoweringError as e:
            raise Error(f"compile_exported: {e}") from None
        self.input_names = user_inputs
        self.executable = _kiln.compile(self.graph, device, threads, True, cache_dir)
        self.device = device
        self.num_user_outputs = len(sig.user_outputs)

    def __call__(self, *args):
        if len(args) != len(self.input_names):
            raise Error(f"the exported program takes {len(self.input_names)} inputs "
                        f"({', '.join(self.input_names)}), got {len(args)}")
        use_torch = any(arrays.is_torch_tensor(a) for a in args)
        ins = [arrays.convert_in(a) for a in args]
        outs = self.executable.run([a for a, _ in ins], [d for _, d in ins])
        conv = arrays.to_torch if use_torch else arrays.to_numpy
        result = [conv(a, d) for a, d in outs][: self.num_user_outputs]
        return result[0] if len(result) == 1 else tuple(result)

    def save(self, directory):
        """Writes `kiln compile`'s artefact (kernels.so, graph.kir, weights.bin, manifest.json)."""
        self.executable.save(str(directory))

    def explain(self):
        return self.executable.explain()


def compile_exported(ep, device="cpu", threads=0, cache_dir="", **unused):
    if not isinstance(ep, torch.export.ExportedProgram):
        raise Error(f"compile_exported takes a torch.export.ExportedProgram, not {type(ep).__name__}")
    return CompiledExport(ep, device, threads, cache_dir)

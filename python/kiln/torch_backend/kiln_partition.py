"""One partition of an ATen graph, compiled by Kiln and called in place of its torch submodule.

Why: the partitioner cuts the graph into submodules; each supported one becomes this module, which
hands its tensor inputs to the compiled Executable without copying (CPU) and returns torch tensors
shaped as the submodule returned them. options["check"] compares every call with eager torch.
Frozen inputs (module state baked in as constants) are still passed in by the caller; every call
checks they are the tensors compiled against, unchanged (storage and torch's version counter, which
in-place writes such as load_state_dict and optimizer steps bump), and compiles again if not.
"""
import torch

from kiln import _kiln, arrays
from kiln._kiln import Error
from torch._subclasses.fake_tensor import unset_fake_temporarily

from kiln.torch_backend.lowering import constant_array, lower_graph

TOLERANCES = {torch.float32: (1e-4, 1e-4), torch.float64: (1e-7, 1e-7), torch.float16: (1e-2, 1e-2),
              torch.bfloat16: (3e-2, 3e-2)}


class KilnPartition(torch.nn.Module):
    def __init__(self, name, submodule, input_metas, options, stats, constants=None):
        super().__init__()
        self.name = name
        self.submodule = submodule  # kept for check mode
        self.check = bool(options.get("check", False))
        self.device = options.get("device", "cpu")
        self.options, self.stats, self.metas = options, stats, input_metas
        names = [n.name for n in submodule.graph.nodes if n.op == "placeholder"]
        self.frozen = {i: name for i, name in enumerate(names) if constants and name in constants}
        self._build({name: constants[name] for name in self.frozen.values()})

    def _build(self, constants):
        """Lowers and compiles with `constants` (placeholder name -> tensor) baked in."""
        with unset_fake_temporarily():  # the first build runs inside AOTAutograd's fake-tensor mode
            arrays_of = {name: constant_array(t) for name, t in constants.items()}
        self.graph, self.positions, self.structure = lower_graph(self.submodule, self.name, self.metas, arrays_of)
        self.executable = _kiln.compile(self.graph, self.device, int(self.options.get("threads", 0)), True,
                                        str(self.options.get("cache_dir", "")))
        self.stats["kiln_compiles"] += 1
        self.frozen_state = [_identity(constants[name]) for name in self.frozen.values()]

    def forward(self, *args):
        if self.frozen and [_identity(args[i]) for i in self.frozen] != self.frozen_state:
            self._build({name: args[i] for i, name in self.frozen.items()})
            self.stats["refreezes"] += 1
        ins = [arrays.from_torch(args[i]) for i in self.positions]
        out_device = next((args[i].device for i in self.positions), torch.device("cpu"))
        outs = self.executable.run([a for a, _ in ins], [d for _, d in ins])
        result = [arrays.to_torch(a, d, out_device) for a, d in outs]
        if self.check:
            self._compare(args, result)
        return tuple(result) if self.structure == "tuple" else result[0]

    def _compare(self, args, result):
        expected = self.submodule(*args)
        expected = list(expected) if isinstance(expected, (list, tuple)) else [expected]
        for i, (got, want) in enumerate(zip(result, expected)):
            rtol, atol = TOLERANCES.get(want.dtype, (0, 0))
            try:
                torch.testing.assert_close(got, want.to(got.device), rtol=rtol, atol=atol, equal_nan=True)
            except AssertionError as e:
                raise Error(f"check: Kiln partition {self.name} output {i} differs from eager torch: {e}") from None


def _identity(t):
    """What a frozen tensor's guard compares: its storage and torch's version counter (a new shape,
    stride or dtype comes with new storage, an in-place resize bumps the version). Two attribute
    reads per tensor: the guard runs on every call (~45 us for MobileNetV3-small's 244 tensors)."""
    return t.data_ptr(), t._version

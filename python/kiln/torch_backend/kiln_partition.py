"""One partition of an ATen graph, compiled by Kiln and called in place of its torch submodule.

Why: the partitioner cuts the graph into submodules; each supported one becomes this module, which
hands its tensor inputs to the compiled Executable without copying (CPU) and returns torch tensors
shaped as the submodule returned them. options["check"] compares every call with eager torch.
"""
import torch

from kiln import _kiln, arrays
from kiln._kiln import Error
from kiln.torch_backend.lowering import lower_graph

TOLERANCES = {torch.float32: (1e-4, 1e-4), torch.float64: (1e-7, 1e-7), torch.float16: (1e-2, 1e-2),
              torch.bfloat16: (3e-2, 3e-2)}


class KilnPartition(torch.nn.Module):
    def __init__(self, name, submodule, input_metas, options, stats, constants=None):
        super().__init__()
        self.name = name
        self.submodule = submodule  # kept for check mode
        self.check = bool(options.get("check", False))
        self.device = options.get("device", "cpu")
        self.graph, self.positions, self.structure = lower_graph(submodule, name, input_metas, constants)
        self.executable = _kiln.compile(self.graph, self.device, int(options.get("threads", 0)), True,
                                        str(options.get("cache_dir", "")))
        stats["kiln_compiles"] += 1

    def forward(self, *args):
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

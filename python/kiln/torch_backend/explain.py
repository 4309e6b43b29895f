"""kiln.explain_torch(model, *args): runs the model once through the kiln backend and reports what
ran where and why (Kiln partitions with their ops, ops left to torch with the reason and source
line, Dynamo's graph breaks).

Why: a backend that silently falls back hides its gaps; this makes each one visible and traceable
to the user's code.
"""
from dataclasses import dataclass, field

import torch

from kiln.torch_backend.backend import make_backend


@dataclass
class TorchExplanation:
    graphs: list = field(default_factory=list)         # GraphReport per compiled graph
    graph_breaks: list = field(default_factory=list)   # Dynamo's reasons, as text
    output: object = None                              # what the model returned

    @property
    def torch_ops(self):
        """Every op left to torch: [(op, reason)]."""
        return [(n.op, n.reason) for g in self.graphs for n in g.torch_nodes] + \
            [(f"partition {p.name}", p.reason) for g in self.graphs for p in g.partitions if p.runs_on == "torch"]

    @property
    def kiln_partitions(self):
        return [p for g in self.graphs for p in g.partitions if p.runs_on == "kiln"]

    def __str__(self):
        head = (f"kiln explain_torch: {len(self.graphs)} graph(s), {len(self.graph_breaks)} graph break(s), "
                f"{len(self.kiln_partitions)} Kiln partition(s), {len(self.torch_ops)} op(s) in torch")
        parts = [head] + [g.to_text() for g in self.graphs]
        for i, reason in enumerate(self.graph_breaks):
            parts.append(f"graph break {i}: {reason}")
        return "\n".join(parts)


def explain_torch(model, *args, dynamic=None, options=None, **kwargs):
    reports = []
    backend = make_backend(reports=reports, **(options or {}))
    compiled = torch.compile(model, backend=backend, dynamic=dynamic)
    with torch.no_grad():
        out = compiled(*args, **kwargs)
    breaks = []
    try:
        dynamo_view = torch._dynamo.explain(model)(*args, **kwargs)
        breaks = [str(getattr(b, "reason", b)) for b in dynamo_view.break_reasons]
    except Exception as e:  # explain is a diagnostic: never fail the report over it
        breaks = [f"(Dynamo's explain failed: {e})"]
    return TorchExplanation(reports, breaks, out)

"""What the backend did with each graph: partitions Kiln compiled (with their ATen and Kiln ops)
and nodes left to torch (with the reason and the user's source line).

Why: "unsupported ops never fail the model" is only useful if the user can see what fell back and
why; explain_torch prints these, and tests assert on them.
"""
from collections import Counter
from dataclasses import dataclass, field


@dataclass
class PartitionReport:
    name: str
    aten_ops: Counter            # ATen op -> count, as captured
    runs_on: str = "kiln"        # "kiln", or "torch" when lowering/compiling it failed
    reason: str = ""             # why it runs on torch
    kiln_ops: dict = field(default_factory=dict)  # the Kiln graph's op histogram (before optimisation)
    compile_stats: dict = field(default_factory=dict)
    inputs: list = field(default_factory=list)    # Kiln input types ("f32[s0, 64]")


@dataclass
class TorchNode:
    name: str
    op: str
    reason: str
    source_line: str = ""


@dataclass
class GraphReport:
    index: int
    partitions: list = field(default_factory=list)
    torch_nodes: list = field(default_factory=list)   # ops Kiln does not take, run by torch
    size_nodes: int = 0                               # SymInt arithmetic (Python, between partitions)

    def kiln_node_count(self):
        return sum(sum(p.aten_ops.values()) for p in self.partitions if p.runs_on == "kiln")

    def to_text(self):
        lines = [f"graph {self.index}: {len(self.partitions)} Kiln partition(s), "
                 f"{len(self.torch_nodes)} op(s) in torch, {self.size_nodes} size computation(s)"]
        for p in self.partitions:
            ops = ", ".join(f"{op} x{n}" if n > 1 else op for op, n in sorted(p.aten_ops.items()))
            if p.runs_on == "kiln":
                st = p.compile_stats
                lines.append(f"  [kiln]  {p.name}: {sum(p.aten_ops.values())} ATen ops -> "
                             f"{st.get('kernels_generated', 0)} generated kernels, {st.get('library_calls', 0)} "
                             f"library calls{' (cache hit)' if st.get('cache_hit') else ''}")
            else:
                lines.append(f"  [torch] {p.name}: Kiln could not compile it: {p.reason}")
            lines.append(f"           ops: {ops}")
        for n in self.torch_nodes:
            lines.append(f"  [torch] {n.name} ({n.op}): {n.reason}")
            if n.source_line:
                lines.append(f"           from: {n.source_line}")
        return "\n".join(lines)

"""Cuts an ATen FX graph into the parts Kiln runs and the parts torch runs, and compiles the former.

Why: unsupported ATen ops must never fail a model. CapabilityBasedPartitioner groups maximal runs of
nodes Kiln can lower (lowering.support_reason) into submodules; each becomes a KilnPartition, and
everything else (unsupported ops, size arithmetic) stays as torch code between them.
"""
import operator
from collections import Counter

import torch
from torch.fx.passes.infra.partitioner import CapabilityBasedPartitioner
from torch.fx.passes.operator_support import OperatorSupportBase

from kiln._kiln import Error
from kiln.torch_backend.errors import LoweringError, source_line, unsupported_error
from kiln.torch_backend.kiln_partition import KilnPartition
from kiln.torch_backend.lowering import support_reason
from kiln.torch_backend.report import GraphReport, PartitionReport, TorchNode

# Ops that move no data in Kiln (views of their input): a partition of only these is left to torch.
_NO_COMPUTE = {"view", "_unsafe_view", "reshape", "permute", "t", "transpose", "expand", "unsqueeze",
               "squeeze", "clone", "alias", "detach", "slice", "select", "lift_fresh_copy", "contiguous",
               "getitem"}


def _op_name(node):
    t = node.target
    if t is operator.getitem:
        return "getitem"
    return getattr(t, "__name__", str(t)).split(".")[0]


def _is_size_node(node):
    """SymInt arithmetic (sym_size, operator.mul on sizes): plain Python between partitions."""
    v = node.meta.get("val")
    return isinstance(v, (torch.SymInt, torch.SymBool, torch.SymFloat, int, float, bool)) and \
        not isinstance(v, torch.Tensor)


class KilnSupport(OperatorSupportBase):
    def __init__(self):
        super().__init__()
        self.reasons = {}

    def is_node_supported(self, submodules, node):
        if node.op != "call_function" or _is_size_node(node):
            return False
        reason = support_reason(node)
        if reason:
            self.reasons[node] = reason
        return reason is None


def partition_and_compile(gm, options, stats, index, constants=None):
    """Returns (GraphModule running Kiln partitions and torch in between, GraphReport). `constants`:
    graph placeholder name -> tensor to bake into the partitions that read it (frozen weights; by
    name: the partitioner works on a copy of the graph)."""
    constants = constants or {}
    report = GraphReport(index)
    support = KilnSupport()
    for node in gm.graph.nodes:
        if node.op == "call_function":
            if _is_size_node(node):
                report.size_nodes += 1
            else:
                support.is_node_supported(None, node)
    fallback = options.get("fallback", True)
    if not fallback and support.reasons:
        node, reason = next(iter(support.reasons.items()))
        raise unsupported_error(node, reason)
    partitioner = CapabilityBasedPartitioner(gm, support, allows_single_node_partition=True)
    proposed = [p for p in partitioner.propose_partitions()
                if any(_op_name(n) not in _NO_COMPUTE for n in p.nodes)]
    in_partitions = set(n for p in proposed for n in p.nodes)
    for node, reason in support.reasons.items():
        report.torch_nodes.append(TorchNode(node.name, str(node.target), reason, source_line(node)))
    for node in gm.graph.nodes:  # supported, but alone in a partition of views: torch runs them
        if node.op == "call_function" and node not in in_partitions and node not in support.reasons \
                and not _is_size_node(node):
            report.torch_nodes.append(TorchNode(node.name, str(node.target), "a view with nothing to compute "
                                                "around it in Kiln (left to torch)", source_line(node)))
    if not proposed:
        return gm, report
    fused = partitioner.fuse_partitions(proposed)
    for node in list(fused.graph.nodes):
        if node.op != "call_module" or not node.target.startswith("fused_"):
            continue
        sub = getattr(fused, node.target)
        name = f"g{index}_{node.target}"
        ops = Counter(_op_name(n) for n in sub.graph.nodes if n.op == "call_function" and _op_name(n) != "getitem")
        part = PartitionReport(name, ops)
        report.partitions.append(part)
        metas = [a.meta.get("val") if isinstance(a, torch.fx.Node) else a for a in node.args]
        sub_inputs = [n.name for n in sub.graph.nodes if n.op == "placeholder"]
        baked = {sub_inputs[i]: constants[a.name] for i, a in enumerate(node.args)
                 if isinstance(a, torch.fx.Node) and a.op == "placeholder" and a.name in constants}
        try:
            kp = KilnPartition(name, sub, metas, options, stats, baked)
        except (LoweringError, Error) as e:
            if not fallback:
                if isinstance(e, LoweringError):
                    raise unsupported_error(next(n for n in sub.graph.nodes if n.op == "call_function"),
                                            str(e)) from None
                raise
            part.runs_on, part.reason = "torch", str(e).splitlines()[0]
            stats["fallback_partitions"] += 1
            continue
        part.kiln_ops = kp.graph.op_counts()
        part.compile_stats = dict(kp.executable.stats)
        part.inputs = [f"{v.dtype}[{', '.join(str(d) for d in v.shape)}]" for v in kp.graph.inputs]
        setattr(fused, node.target, kp)
        stats["partitions"] += 1
    fused.recompile()
    return fused, report

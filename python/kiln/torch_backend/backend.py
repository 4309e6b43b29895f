"""The torch.compile backend: Dynamo's FX graph -> AOTAutograd (ATen, core decompositions) ->
partitions compiled by Kiln, torch for the rest.

Why: AOTAutograd turns whatever Dynamo captured into a small, stable ATen op set (and handles
autograd); Kiln then only needs a lowering per ATen op. scaled_dot_product_attention is kept whole
by removing its decompositions, so it reaches Kiln as one attention node.
"""
import functools

import torch
from torch._decomp import core_aten_decompositions
from torch._functorch.aot_autograd import aot_module_simplified, make_boxed_func

from kiln.torch_backend.partition import partition_and_compile

# How often each thing happened in this process (tests count recompiles with it).
STATS = {"graphs": 0, "kiln_compiles": 0, "partitions": 0, "fallback_partitions": 0, "refreezes": 0}
REPORTS = []  # one GraphReport per compiled graph, in order

_KEEP_WHOLE = ("scaled_dot_product", "native_layer_norm", "_softmax", "_log_softmax", "gelu")


@functools.lru_cache(maxsize=1)
def decompositions():
    """Core ATen decompositions, less those of ops Kiln keeps whole (attention, norms, softmax)."""
    table = dict(core_aten_decompositions())
    for op in list(table):
        if any(k in str(op) for k in _KEEP_WHOLE):
            del table[op]
    return table


def _mutated_placeholders(gm):
    """Names of the graph's inputs that it writes in place (AOTAutograd keeps inference input
    mutations as copy_ / in-place ops on the placeholder): a batch norm's running statistics in
    train mode. Those are never frozen: the write must reach the caller's tensor."""
    names = set()
    for node in gm.graph.nodes:
        if node.op != "call_function" or not node.args or not isinstance(node.args[0], torch.fx.Node):
            continue
        schema = getattr(node.target, "_schema", None)
        writes_first = schema is not None and schema.arguments and schema.arguments[0].alias_info is not None \
            and schema.arguments[0].alias_info.is_write
        if writes_first and node.args[0].op == "placeholder":
            names.add(node.args[0].name)
    return names


def _fx_compiler(options, frozen=None):
    def compile_graph(gm, example_inputs):
        index = STATS["graphs"]
        STATS["graphs"] += 1
        placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
        constants = {}
        if frozen and len(placeholders) == len(frozen):
            mutated = _mutated_placeholders(gm)
            constants = {p.name: t for p, t in zip(placeholders, frozen) if t is not None and p.name not in mutated}
        fused, report = partition_and_compile(gm, options, STATS, index, constants)
        REPORTS.append(report)
        sink = options.get("reports")
        if sink is not None:
            sink.append(report)
        return make_boxed_func(fused.forward)
    return compile_graph


def _is_module_state(node, tensor):
    """Whether a Dynamo graph input is a module's parameter or buffer (not a call argument)."""
    if isinstance(tensor, torch.nn.Parameter):
        return True
    source = getattr(node.meta.get("grapharg"), "source", None)
    name = source.name() if source is not None else ""
    return "._buffers[" in name or "._parameters[" in name


def kiln_backend(gm, example_inputs, options=None, mode=None):
    """torch.compile(model, backend="kiln", options={...}). Options: device ("cpu"/"cuda"), check
    (compare every partition with eager), fallback (False: raise kiln.UnsupportedOpError on an op
    Kiln cannot run), threads, cache_dir, freeze (default: on when grad is disabled; False turns it
    off): the module's parameters and buffers are baked into the compiled code as constants, so Kiln
    folds batch norms into convs and pre-packs weights once; each partition checks at every call
    that those tensors are unchanged (torch's version counter, their storage) and compiles again
    with the new values when one changed (STATS["refreezes"])."""
    options = dict(options or {})
    frozen = None
    freeze = options.get("freeze")
    if (freeze is None or freeze) and not torch.is_grad_enabled():
        # Dynamo passes parameters and buffers as graph inputs (inlined nn modules); in inference
        # AOTAutograd's graph takes the same inputs in the same order. The real tensors are kept
        # (outside AOTAutograd's fake-tensor mode) for their values and the partitions' guards.
        placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
        if len(placeholders) == len(example_inputs):
            frozen = [t if isinstance(t, torch.Tensor) and _is_module_state(n, t) else None
                      for n, t in zip(placeholders, example_inputs)]
    return aot_module_simplified(gm, example_inputs, fw_compiler=_fx_compiler(options, frozen),
                                 bw_compiler=_fx_compiler(options), decompositions=decompositions(),
                                 keep_inference_input_mutations=True)


def make_backend(**options):
    """A backend callable with these options bound (kiln.compile uses it)."""
    def backend(gm, example_inputs, options=None, mode=None):
        return kiln_backend(gm, example_inputs, options={**bound, **(options or {})})
    bound = dict(options)
    return backend

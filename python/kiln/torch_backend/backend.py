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

from kiln.torch_backend.lowering import constant_array
from kiln.torch_backend.partition import partition_and_compile

# How often each thing happened in this process (tests count recompiles with it).
STATS = {"graphs": 0, "kiln_compiles": 0, "partitions": 0, "fallback_partitions": 0}
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


def _fx_compiler(options, frozen=None):
    def compile_graph(gm, example_inputs):
        index = STATS["graphs"]
        STATS["graphs"] += 1
        placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
        constants = {}
        if frozen and len(placeholders) == len(frozen):
            constants = {p.name: t for p, t in zip(placeholders, frozen) if t is not None}
        fused, report = partition_and_compile(gm, options, STATS, index, constants)
        REPORTS.append(report)
        sink = options.get("reports")
        if sink is not None:
            sink.append(report)
        return make_boxed_func(fused.forward)
    return compile_graph


def kiln_backend(gm, example_inputs, options=None, mode=None):
    """torch.compile(model, backend="kiln", options={...}). Options: device ("cpu"/"cuda"), check
    (compare every partition with eager), fallback (False: raise kiln.UnsupportedOpError on an op
    Kiln cannot run), threads, cache_dir, freeze (True: parameters are baked into the compiled code as
    constants, so Kiln folds and pre-packs them; only for inference with weights that stay fixed)."""
    options = dict(options or {})
    frozen = None
    if options.get("freeze") and not torch.is_grad_enabled():
        # Dynamo passes parameters as graph inputs (inlined nn modules); in inference AOTAutograd's
        # graph takes the same inputs in the same order, so input i is frozen when it is a Parameter.
        # Read them here, outside AOTAutograd's fake-tensor mode.
        frozen = [constant_array(t) if isinstance(t, torch.nn.Parameter) else None for t in example_inputs]
    return aot_module_simplified(gm, example_inputs, fw_compiler=_fx_compiler(options, frozen),
                                 bw_compiler=_fx_compiler(options), decompositions=decompositions(),
                                 keep_inference_input_mutations=True)


def make_backend(**options):
    """A backend callable with these options bound (kiln.compile uses it)."""
    def backend(gm, example_inputs, options=None, mode=None):
        return kiln_backend(gm, example_inputs, options={**bound, **(options or {})})
    bound = dict(options)
    return backend

// The default pipeline. Each entry says why it sits where it does.
#include "passes/pipelines.h"

namespace kiln::passes {

const Pipeline& default_pipeline() {
  static const Pipeline pipeline = {
      {"cleanup", "importers and tracers leave dead code, shape arithmetic and repeated subgraphs",
       {
           {"dce", "first, so later passes do not spend time on nodes nobody reads"},
           {"shape-folding", "resolves shape_of chains so constant folding sees constants"},
           {"constant-folding", "folds the constants shape folding exposed, and weight transforms"},
           {"algebraic-simplification", "removes identities, which exposes more CSE and folding"},
           {"cse", "after simplification, equal expressions are spelled the same way"},
           {"activation-recognition", "after CSE, an expansion reads one x (not equal copies of it)"},
           {"attention-recognition", "after folding, an exporter's scale and causal mask are constants"},
           {"dce", "collects what the rewrites above left unread"},
       },
       /*to_fixed_point=*/true, 10},
      {"decompose", "the target declares which high-level ops it runs natively",
       {{"decomposition", "once per graph: decompositions emit only primitives or native ops"}},
       false, 1},
      {"cleanup-after-decompose",
       "decompositions repeat shared subexpressions (x - mean twice) and constants",
       {
           {"constant-folding", "decompositions of ops with constant operands fold away"},
           {"algebraic-simplification", "decompositions emit x*1 / reshape chains in corner cases"},
           {"cse", "merges repeated scalars and subexpressions across decomposed ops"},
           {"dce", "collects the replaced high-level nodes' leftovers"},
       },
       true, 10},
      {"canonicalize-broadcasts", "last: the lowering reads elementwise operands in this form",
       {
           {"broadcast-canonicalization", "scalars stay rank 0, other operands get full rank"},
           {"constant-folding", "reshapes of constants inserted above become constants"},
           {"cse", "merges the scalars that were splat tensors"},
           {"dce", "collects the replaced splat constants"},
       },
       false, 1},
  };
  return pipeline;
}

}  // namespace kiln::passes

// Pictures of a compiled graph with each fused group (kernel) in its own colour: Graphviz DOT for
// `kiln dump` and a self-contained SVG for `kiln explain --html`. Why: "which ops became which
// kernel" is easiest to see.
#pragma once

#include <string>

namespace kiln::runtime {
class CompiledExecutable;
}

namespace kiln::cli {

// digraph with one cluster per fused group, labelled by its kernel name.
std::string fused_graph_dot(const runtime::CompiledExecutable& exe);
// A layered drawing (rows by depth) with nodes filled by group colour.
std::string fused_graph_svg(const runtime::CompiledExecutable& exe);

}  // namespace kiln::cli

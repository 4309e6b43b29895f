// placeholder
#include "kiln/graph.h"
namespace kiln {
std::string print_graph(const Graph&) { return ""; }
std::unique_ptr<Graph> parse_graph(const std::string&) { throw Error("parser not implemented"); }
void verify(const Graph&) {}
}

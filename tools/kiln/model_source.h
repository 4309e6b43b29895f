// Where a command's model comes from: the built-in transformer block (no MODEL argument) or an
// ONNX file, with seeded random inputs. Why: explain, dump, compile and gap all start the same way.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "kiln/graph.h"
#include "kiln/host_tensor.h"
#include "kiln/onnx.h"

namespace kiln::cli {

struct ModelSource {
  std::string label;                 // "transformer_block (built-in)" or the file's path
  std::unique_ptr<Graph> graph;      // as traced or imported, before optimisation
  std::vector<HostTensor> inputs;    // one per graph input
  double import_ms = 0;              // tracing or ONNX import
};

// NAME=VALUE pairs (--dim) to a map; throws kiln::Error naming a malformed one.
std::map<std::string, int64_t> parse_dims(const std::vector<std::string>& dims);

// Seeded random inputs for g; symbolic dims take `dims` (default 1).
std::vector<HostTensor> random_inputs(const Graph& g, const std::map<std::string, int64_t>& dims, uint64_t seed);

// An ONNX model, or a graph in Kiln's text IR when the file ends in .kir (a fuzz regression, a
// pass test's input): kiln run/dump/explain take either.
std::unique_ptr<Graph> load_model_file(const std::string& path, const ImportOptions& import_options);

// path empty: the built-in transformer block on f32[2, 16, 64] (dims B and T symbolic).
ModelSource load_model_source(const std::string& path, const std::map<std::string, int64_t>& dims, uint64_t seed);

}  // namespace kiln::cli

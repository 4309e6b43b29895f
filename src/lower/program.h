// The program-level IR between the fusion groups and an Executable: the steps one run takes, in
// order — generated kernels, library calls, host steps — over buffers with their planned slots
// (inputs, constants, outputs, held tensors, arena slots with lifetimes). Why: both targets build
// it the same way (runtime::lower_for_target) and differ only in how they print, compile and run
// its kernels and where they run its library steps; `kiln dump` prints it (program.txt).
#pragma once

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "kiln/graph.h"
#include "lower/fusion.h"
#include "lower/lower_group.h"

namespace kiln::lower {

// Where a buffer value lives during a run.
struct BufferSlot {
  enum Kind { kInput, kConstant, kOutput, kHeld, kArena } kind = kHeld;
  int index = 0;  // input index, output index, or arena request index
};

struct ProgramStep {
  bool library = false;        // a library call (or a host step): runs `node` whole
  bool host = false;           // computed on the host (control flow, containers, strings; CUDA: shape arithmetic)
  const Node* node = nullptr;  // library / host
  int kernel = -1;             // index into Program::kernels
  std::string name;
  std::vector<std::string> source_ops;
};

struct Program {
  std::unique_ptr<Graph> graph;  // the graph the steps run (after decomposition for fusion)
  Schedule schedule;
  std::vector<LoweredKernel> kernels;
  std::vector<ProgramStep> steps;
  std::map<const Value*, BufferSlot> slots;
  std::vector<const Value*> arena_values;           // arena request i holds arena_values[i]
  std::vector<std::pair<int, int>> arena_lifetimes;  // per request: the steps that write and last read it
  std::vector<int> arena_in_place_of;               // per request: the request it overwrites, or -1
  std::vector<std::string> symbols;                 // the symbolic dims every kernel takes
  std::vector<std::string> decomposition_notes;

  // The buffers a step reads and writes (kernel params; a library step's node operands/results).
  std::pair<std::vector<const Value*>, std::vector<const Value*>> step_buffers(size_t step) const;
};

// One line per buffer and per step: "3  kernel   kiln_k3  reads %4 %w  writes %7   (mul, add)".
std::string print_program(const Program& p);

}  // namespace kiln::lower

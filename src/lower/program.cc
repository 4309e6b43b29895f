// The program-level IR's queries and its printer (see program.h).
#include "lower/program.h"

#include <sstream>

namespace kiln::lower {

namespace {

std::string slot_text(const BufferSlot& s) {
  switch (s.kind) {
    case BufferSlot::kInput: return "input " + std::to_string(s.index);
    case BufferSlot::kConstant: return "constant";
    case BufferSlot::kOutput: return "output " + std::to_string(s.index);
    case BufferSlot::kHeld: return "held";
    case BufferSlot::kArena: return "arena " + std::to_string(s.index);
  }
  return "?";
}

// A value's name, or v<id> for unnamed intermediates (ids are stable within the graph).
std::string label(const Value* v) { return "%" + (v->name.empty() ? "v" + std::to_string(v->id) : v->name); }

std::string names(const std::vector<const Value*>& vs) {
  std::string out;
  for (const Value* v : vs) out += (out.empty() ? "" : " ") + label(v);
  return out.empty() ? "-" : out;
}

}  // namespace

std::pair<std::vector<const Value*>, std::vector<const Value*>> Program::step_buffers(size_t step) const {
  std::pair<std::vector<const Value*>, std::vector<const Value*>> out;
  const ProgramStep& s = steps.at(step);
  if (s.library) {
    for (const Value* v : s.node->inputs) out.first.push_back(v);
    for (const Value* v : s.node->outputs) out.second.push_back(v);
    return out;
  }
  const LoweredKernel& k = kernels.at(size_t(s.kernel));
  for (size_t p = 0; p < k.param_values.size(); ++p)
    (k.kernel.params[p].is_output ? out.second : out.first).push_back(k.param_values[p]);
  return out;
}

std::string print_program(const Program& p) {
  std::ostringstream os;
  int kernels = 0, library = 0, host = 0;
  for (const ProgramStep& s : p.steps) (s.host ? host : s.library ? library : kernels) += 1;
  os << "program " << p.graph->name() << ": " << p.steps.size() << " steps (" << kernels << " kernels, " << library
     << " library calls, " << host << " host steps), " << p.slots.size() << " buffers, " << p.arena_values.size()
     << " in the arena\n";
  if (!p.symbols.empty()) {
    os << "symbols:";
    for (const std::string& s : p.symbols) os << " " << s;
    os << "\n";
  }
  os << "buffers:\n";
  // In the order the steps write them (inputs and constants first), so the listing reads top down.
  std::vector<const Value*> order;
  std::map<const Value*, bool> listed;
  auto list = [&](const Value* v) {
    if (!p.slots.count(v) || listed[v]) return;
    listed[v] = true;
    order.push_back(v);
  };
  for (const Value* v : p.graph->inputs()) list(v);
  for (const auto& [v, slot] : p.slots)
    if (slot.kind == BufferSlot::kConstant) list(v);
  for (size_t i = 0; i < p.steps.size(); ++i)
    for (const Value* v : p.step_buffers(i).second) list(v);
  for (const auto& [v, slot] : p.slots) list(v);
  for (const Value* v : order) {
    const BufferSlot& slot = p.slots.at(v);
    os << "  " << label(v) << "  " << slot_text(slot) << "  " << v->type.to_string();
    if (slot.kind == BufferSlot::kArena) {
      const auto& [first, last] = p.arena_lifetimes.at(size_t(slot.index));
      os << "  steps " << first << ".." << last;
      int over = p.arena_in_place_of.empty() ? -1 : p.arena_in_place_of.at(size_t(slot.index));
      if (over >= 0) os << "  (in place of arena " << over << ")";
    }
    os << "\n";
  }
  os << "steps:\n";
  for (size_t i = 0; i < p.steps.size(); ++i) {
    const ProgramStep& s = p.steps[i];
    const auto [reads, writes] = p.step_buffers(i);
    os << "  " << i << "  " << (s.host ? "host   " : s.library ? "library" : "kernel ") << "  "
       << (s.library ? std::string(op_name(s.node->op)) : p.kernels.at(size_t(s.kernel)).kernel.name) << "  reads "
       << names(reads) << "  writes " << names(writes);
    if (!s.library) {
      os << "  (";
      for (size_t k = 0; k < s.source_ops.size(); ++k) os << (k ? ", " : "") << s.source_ops[k];
      os << ")";
    }
    os << "\n";
  }
  return os.str();
}

}  // namespace kiln::lower

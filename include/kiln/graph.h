// Graph: typed SSA dataflow IR. Values are produced once (by a node or as a graph input) and
// carry a TensorType; nodes hold an Op, operands, attributes and outputs. Why: one structure that
// capture builds, passes rewrite, the interpreter runs and the scheduler lowers.
#pragma once

#include <list>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "kiln/attrs.h"
#include "kiln/ops.h"
#include "kiln/types.h"

namespace kiln {

struct Node;

struct Use {
  Node* user;
  int operand_index;
};

struct Value {
  int id = 0;                 // unique within the graph, stable for its lifetime
  TensorType type;
  Node* producer = nullptr;   // null for graph inputs
  int output_index = 0;
  std::string name;           // optional, user-facing (ONNX tensor names, API input names)
  std::vector<Use> uses;      // one entry per operand slot that reads this value
};

struct Node {
  int id = 0;
  Op op;
  std::vector<Value*> inputs;
  std::vector<Value*> outputs;
  Attrs attrs;
  std::string name;  // optional, e.g. the ONNX node name, for messages
  const OpInfo& info() const { return op_info(op); }
  Value* output() const { return outputs.at(0); }
  std::string describe() const;  // "node 'name' (add)" or "node #4 (add)"
  // Whether an operand or result is a str tensor: such nodes run on the host in the interpreter
  // (generated kernels never see strings).
  bool has_string_values() const;
};

// An assumption about symbolic dims made while inferring shapes, checked when the graph runs.
struct ShapeGuard {
  SymInt lhs, rhs;     // lhs == rhs must hold
  std::string reason;  // where it came from
  std::string to_string() const;
};

class Graph {
 public:
  explicit Graph(std::string name = "main") : name_(std::move(name)) {}
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;
  std::unique_ptr<Graph> clone() const;

  const std::string& name() const { return name_; }
  void set_name(std::string n) { name_ = std::move(n); }

  Value* add_input(const std::string& name, TensorType type);
  // Creates a node, filling default attributes and inferring output types; throws kiln::Error
  // naming the op, operand types and rule on ill-typed input. Inserted at the insertion point.
  std::vector<Value*> add_node(Op op, const std::vector<Value*>& inputs, Attrs attrs = {},
                               const std::string& node_name = "");
  Value* add(Op op, const std::vector<Value*>& inputs, Attrs attrs = {},
             const std::string& node_name = "") {
    return add_node(op, inputs, std::move(attrs), node_name).at(0);
  }
  Value* constant(HostTensor t);
  Value* scalar(DType dtype, double v) { return constant(HostTensor::scalar(dtype, v)); }

  // New nodes go before `pos` (null: at the end).
  void set_insertion_point(Node* pos) { insert_before_ = pos; }
  Node* insertion_point() const { return insert_before_; }

  void set_outputs(std::vector<Value*> outs);
  const std::vector<Value*>& inputs() const { return inputs_; }
  const std::vector<Value*>& outputs() const { return outputs_; }
  bool is_output(const Value* v) const;

  // Nodes in order; the order is always topological (builders append, passes insert before use).
  const std::list<std::unique_ptr<Node>>& nodes() const { return nodes_; }
  std::vector<Node*> node_list() const;
  int num_nodes() const { return int(nodes_.size()); }

  void replace_all_uses(Value* from, Value* to);  // graph outputs included
  void set_operand(Node* n, int index, Value* v);
  // Removes a node whose outputs are unused (throws otherwise).
  void erase_node(Node* n);
  // Re-sorts nodes topologically (stable); throws kiln::Error naming a node on a cycle.
  void topological_sort();

  std::vector<ShapeGuard>& guards() { return guards_; }
  const std::vector<ShapeGuard>& guards() const { return guards_; }
  // Infers types for (op, operand types, attrs) without building a node.
  std::vector<TensorType> infer_types(Op op, const std::vector<TensorType>& in, const Attrs& attrs,
                                      const std::string& where);
  // Fills defaults for missing optional attributes; rejects unknown ones.
  static Attrs complete_attrs(Op op, Attrs attrs, const std::string& where);

  std::string to_dot() const;  // Graphviz
  std::string to_text() const;  // the text IR (src/ir/printer.cc)

  // All values ever created (some may be dead after erase_node); for id lookup.
  Value* value_by_id(int id) const;
  int next_value_id() const { return int(values_.size()); }

 private:
  Value* new_value(TensorType t);
  std::string name_;
  std::vector<std::unique_ptr<Value>> values_;
  std::list<std::unique_ptr<Node>> nodes_;
  std::map<const Node*, std::list<std::unique_ptr<Node>>::iterator> node_pos_;
  std::vector<Value*> inputs_, outputs_;
  std::vector<ShapeGuard> guards_;
  Node* insert_before_ = nullptr;
  int next_node_id_ = 0;
};

// The text IR: print and parse round-trip exactly (src/ir/printer.cc, src/ir/parser.cc).
std::string print_graph(const Graph& g);
// Throws kiln::Error "line L, column C: ..." on malformed text.
std::unique_ptr<Graph> parse_graph(const std::string& text);
// One type in the text form: "f32[B, 4]", "seq<f32[2], f32[3]>", "opt<seq<i64>>".
TensorType parse_type(const std::string& text);
// Checks SSA, use lists, operand counts, attributes and re-inferred types; throws kiln::Error
// naming the node and the rule broken (src/ir/verifier.cc).
void verify(const Graph& g);

}  // namespace kiln

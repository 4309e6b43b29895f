// Typed node attributes (axis, perm, eps, dtype, constant tensors, symbolic shapes...). Why: ops
// carry parameters that the verifier, printer, parser and every backend read through one API.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "kiln/host_tensor.h"
#include "kiln/symint.h"

namespace kiln {

class Graph;
// A sub-graph attribute (If's branches, Loop's and Scan's body). Immutable once built, so clones
// of a node share it; it reads only its own inputs (captured outer values are explicit operands).
using GraphAttr = std::shared_ptr<const Graph>;

enum class AttrKind : uint8_t { Int, Float, Ints, Floats, String, DType, Shape, Tensor, Graph };
std::string_view attr_kind_name(AttrKind k);

using AttrValue = std::variant<int64_t, double, std::vector<int64_t>, std::vector<double>,
                               std::string, DType, Shape, HostTensor, GraphAttr>;
AttrKind attr_kind_of(const AttrValue& v);

// Text form of one value: 3, 1.5, [1, 2], [0.5], "tanh", f32, [B, 4], dense<f32[2]>[1.0, 2.0].
std::string attr_to_string(const AttrValue& v);
// Parses one value of the expected kind starting at text[pos]; advances pos. Throws kiln::Error
// with a message naming the column. (Graph values span lines: the text IR parser reads them.)
AttrValue parse_attr_value(const std::string& text, size_t& pos, AttrKind expected);

class Attrs {
 public:
  Attrs() = default;
  Attrs(std::initializer_list<std::pair<const std::string, AttrValue>> init) : map_(init) {}

  void set(const std::string& name, AttrValue v) { map_[name] = std::move(v); }
  bool has(const std::string& name) const { return map_.count(name) != 0; }
  void erase(const std::string& name) { map_.erase(name); }
  const AttrValue& get(const std::string& name) const;

  // Typed getters throw kiln::Error naming the attribute when missing or of another kind.
  int64_t get_int(const std::string& name) const;
  double get_float(const std::string& name) const;  // accepts an int too
  const std::vector<int64_t>& get_ints(const std::string& name) const;
  std::vector<double> get_floats(const std::string& name) const;  // accepts ints too
  const std::string& get_string(const std::string& name) const;
  DType get_dtype(const std::string& name) const;
  Shape get_shape(const std::string& name) const;  // accepts an int list too
  const HostTensor& get_tensor(const std::string& name) const;
  const Graph& get_graph(const std::string& name) const;

  const std::map<std::string, AttrValue>& items() const { return map_; }
  friend bool operator==(const Attrs& a, const Attrs& b);

 private:
  std::map<std::string, AttrValue> map_;  // sorted: deterministic printing and hashing
};

bool attr_values_equal(const AttrValue& a, const AttrValue& b);

}  // namespace kiln

// ONNX's 8- and 4-bit element types in the importer. Why: Kiln's `cast` to a float8 type is the
// plain (non-saturating) conversion, so ONNX's default saturate=1 becomes an explicit clamp to the
// type's largest finite value before it; and only the ops that the ONNX tests use on these types
// (casts, quantization, data movement) accept them, with an error naming the node otherwise.
#include <cmath>
#include <set>

#include "frontend/onnx/importer.h"

namespace kiln::onnx_import {

Value* onnx_cast(NodeCtx& c, Value* x, DType to, bool saturate, const std::string& round_mode) {
  if (to == DType::F8E8M0 && round_mode != "up")
    c.unsupported(str("cast to f8e8m0 with round_mode '", round_mode, "' (Kiln rounds up, the default)"));
  // saturate applies to the float8 targets (f4e2m1 always saturates; f8e8m0 clamps to 2^127).
  bool clamps = saturate && is_narrow_float(to) && to != DType::F4E2M1;
  if (!clamps) return c.cast(x, to);
  // Clamp where both bounds are exact: f32 (f16 cannot hold 2^127) or the f64 input itself.
  Value* wide = x->type.dtype == DType::F64 ? x : c.cast(x, DType::F32);
  double hi = narrow_float_max(to);
  return c.cast(c.emit(Op::Clamp, {wide}, {{"min", -hi}, {"max", hi}}), to);
}

void check_narrow_operands(NodeCtx& c) {
  // Ops that move, cast or (de)quantize values without computing on them in the narrow type.
  static const std::set<std::string> accepted = {
      "Cast",      "CastLike", "QuantizeLinear", "DequantizeLinear", "Identity", "Reshape", "Flatten",
      "Squeeze",   "Unsqueeze", "Transpose",     "Shape",            "Size",     "Constant"};
  if (accepted.count(c.op_type())) return;
  for (int i = 0; i < c.num_inputs(); ++i) {
    if (!c.has_input(i)) continue;
    DType t;
    try {
      t = c.input(i)->type.dtype;
    } catch (const Error&) {
      continue;  // an undefined input: the op's own handler reports it
    }
    if (is_narrow(t))
      c.unsupported(str(c.op_type(), " on input ", i, " of dtype ", dtype_name(t),
                        ": the 8- and 4-bit types are supported by Cast, CastLike, QuantizeLinear, "
                        "DequantizeLinear and data movement ops only"));
  }
}

}  // namespace kiln::onnx_import

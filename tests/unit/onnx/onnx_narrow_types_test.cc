// The ONNX importer on the 8- and 4-bit element types and UINT64: 4-bit tensors unpacked from two
// per byte (low nibble first) in raw_data and int32_data at odd sizes, uint64_data, Cast's
// saturate on and off, and clear errors for ops and rounding modes Kiln does not compute.
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <cmath>
#include <functional>
#include <limits>

#include "kiln/interp.h"
#include "kiln/onnx.h"
#include "unit/onnx/one_node_model.h"

using namespace kiln;
using kiln::testing::Io;
using kiln::testing::OneNode;

namespace {

constexpr int kF = onnx::TensorProto::FLOAT, kInt4 = 22, kUInt4 = 21, kF8E4M3FN = 17, kF8E8M0 = 24;

// A Cast of initializer `w` (filled by `fill`) to `to`.
OneNode cast_of_initializer(int elem, std::vector<int64_t> dims, int to,
                            const std::function<void(onnx::TensorProto&)>& fill) {
  OneNode n("Cast", {}, {"y"}, 24, 0);
  n.node->add_input("w");
  n.attr("to", int64_t(to));
  auto* w = n.m.mutable_graph()->add_initializer();
  w->set_name("w");
  w->set_data_type(elem);
  for (int64_t d : dims) w->add_dims(d);
  fill(*w);
  return n;
}

TEST(OnnxNarrowTypes, FourBitTensorsUnpackLowNibbleFirst) {
  // int4 {-8, 7, -1, 3, 5}: nibbles 8 7 f 3 5 -> bytes 0x78 0x3f 0x05 (the last high nibble pads).
  auto raw = cast_of_initializer(kInt4, {5}, onnx::TensorProto::INT32,
                                 [](onnx::TensorProto& w) { w.set_raw_data(std::string("\x78\x3f\x05", 3)); });
  HostTensor y = raw.run({})[0];
  std::vector<int64_t> want = {-8, 7, -1, 3, 5};
  ASSERT_EQ(y.numel(), 5);
  for (int64_t i = 0; i < 5; ++i) EXPECT_EQ(y.get_i64(i), want[size_t(i)]) << i;
  // uint4 {1, 2, 15} in int32_data: one packed byte per entry.
  auto typed = cast_of_initializer(kUInt4, {3}, onnx::TensorProto::INT32, [](onnx::TensorProto& w) {
    w.add_int32_data(0x21);
    w.add_int32_data(0x0f);
  });
  HostTensor u = typed.run({})[0];
  EXPECT_EQ(u.get_i64(0), 1);
  EXPECT_EQ(u.get_i64(1), 2);
  EXPECT_EQ(u.get_i64(2), 15);
  // A raw_data of the unpacked size is refused with the packed size it needs.
  auto wrong = cast_of_initializer(kInt4, {5}, onnx::TensorProto::INT32,
                                   [](onnx::TensorProto& w) { w.set_raw_data(std::string(5, '\0')); });
  std::string e = wrong.import_error();
  EXPECT_NE(e.find("needs 3"), std::string::npos) << e;
}

TEST(OnnxNarrowTypes, Uint64DataHoldsValuesAboveTwoToThe63) {
  auto n = cast_of_initializer(onnx::TensorProto::UINT64, {2}, onnx::TensorProto::DOUBLE, [](onnx::TensorProto& w) {
    w.add_uint64_data((1ull << 63) + 2048);
    w.add_uint64_data(3);
  });
  HostTensor y = n.run({})[0];
  EXPECT_EQ(y.get_f64(0), 9223372036854777856.0);  // 2^63 + 2^11, exact in f64
  EXPECT_EQ(y.get_f64(1), 3.0);
}

TEST(OnnxNarrowTypes, CastSaturatesByDefaultAndNotWithSaturateZero) {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  HostTensor x = HostTensor::from_doubles(DType::F32, {5}, {1000, -inf, nan, 0.3, -1e-9});
  for (int saturate : {1, 0}) {
    OneNode n("Cast", {{"x", kF, {5}}}, {"y"}, 24, 0);
    n.attr("to", int64_t(kF8E4M3FN));
    n.attr("saturate", int64_t(saturate));
    HostTensor y = n.run({x})[0];
    ASSERT_EQ(y.dtype(), DType::F8E4M3FN);
    if (saturate) {
      EXPECT_EQ(y.get_f64(0), 448.0);   // clamped to the largest value
      EXPECT_EQ(y.get_f64(1), -448.0);  // -inf too
    } else {
      EXPECT_TRUE(std::isnan(y.get_f64(0)));  // e4m3fn has no inf: overflow is NaN
      EXPECT_TRUE(std::isnan(y.get_f64(1)));
    }
    EXPECT_TRUE(std::isnan(y.get_f64(2)));
    EXPECT_EQ(y.get_f64(3), 0.3125);
    EXPECT_EQ(y.data<uint8_t>()[4], 0x80) << "-1e-9 underflows to -0";
  }
}

TEST(OnnxNarrowTypes, UnsupportedUsesNameTheNodeAndDType) {
  OneNode add("Add", {{"a", kF8E4M3FN, {2}}, {"b", kF8E4M3FN, {2}}}, {"y"}, 24, 0);
  std::string e = add.import_error();
  EXPECT_NE(e.find("the_Add"), std::string::npos) << e;
  EXPECT_NE(e.find("f8e4m3fn"), std::string::npos) << e;
  OneNode nearest("Cast", {{"x", kF, {2}}}, {"y"}, 24, 0);
  nearest.attr("to", int64_t(kF8E8M0));
  nearest.attr("round_mode", std::string("nearest"));
  e = nearest.import_error();
  EXPECT_NE(e.find("the_Cast"), std::string::npos) << e;
  EXPECT_NE(e.find("round_mode 'nearest'"), std::string::npos) << e;
}

}  // namespace

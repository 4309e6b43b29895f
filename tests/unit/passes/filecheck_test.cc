// The FileCheck matcher must fail when the output does not match: otherwise every .kir test passes.
#include <gtest/gtest.h>

#include "common/filecheck.h"

using kiln::testing::filecheck;

namespace {
const char* kOutput =
    "graph @main(%x: f32[2]) {\n"
    "  %0 = add(%x, %x) : f32[2]\n"
    "  %1 = mul(%0, %x) : f32[2]\n"
    "  return %1\n"
    "}\n";
}

TEST(FileCheck, PlainCheckFindsLinesInOrder) {
  EXPECT_TRUE(filecheck("// CHECK: add(\n// CHECK: mul(\n", kOutput).ok);
  EXPECT_FALSE(filecheck("// CHECK: mul(\n// CHECK: add(\n", kOutput).ok);
  EXPECT_FALSE(filecheck("// CHECK: sub(\n", kOutput).ok);
}

TEST(FileCheck, NextAndSame) {
  EXPECT_TRUE(filecheck("// CHECK: add(\n// CHECK-NEXT: mul(\n// CHECK-NEXT: return\n", kOutput).ok);
  EXPECT_FALSE(filecheck("// CHECK: graph\n// CHECK-NEXT: mul(\n", kOutput).ok);
  EXPECT_TRUE(filecheck("// CHECK: %0 = add(\n// CHECK-SAME: : f32[2]\n", kOutput).ok);
  EXPECT_FALSE(filecheck("// CHECK: %0 = add(\n// CHECK-SAME: mul\n", kOutput).ok);
}

TEST(FileCheck, NotBetweenMatchesAndAtTheEnd) {
  EXPECT_TRUE(filecheck("// CHECK-NOT: sub\n// CHECK: add\n", kOutput).ok);
  EXPECT_FALSE(filecheck("// CHECK: graph\n// CHECK-NOT: add\n// CHECK: mul\n", kOutput).ok);
  EXPECT_TRUE(filecheck("// CHECK: graph\n// CHECK-NOT: add\n// CHECK: %0\n", kOutput).ok);
  EXPECT_FALSE(filecheck("// CHECK: add\n// CHECK-NOT: return\n", kOutput).ok);
}

TEST(FileCheck, RegexesAndVariables) {
  EXPECT_TRUE(filecheck("// CHECK: [[A:%[0-9]+]] = add\n// CHECK: mul([[A]], %x)\n", kOutput).ok);
  EXPECT_FALSE(filecheck("// CHECK: [[A:%[0-9]+]] = add\n// CHECK: mul(%x, [[A]])\n", kOutput).ok);
  EXPECT_TRUE(filecheck("// CHECK: {{(add|sub)}}(%x\n", kOutput).ok);
  EXPECT_FALSE(filecheck("// CHECK: [[UNDEFINED]]\n", kOutput).ok);
  EXPECT_EQ(filecheck("// CHECK: a\n// CHECK-NOT: b\n// XCHECK: c\n", kOutput).num_directives, 2);
}

// The row-form selector (src/codegen/cuda/rows/select_row_form.cc): which form a row kernel takes
// by shape and device, forcing one, the error for a form that does not exist, and the kernels of
// every form on a set of row graphs against hashes recorded when the forms became modules.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <iomanip>
#include <map>
#include <sstream>

#include "unit/cuda/row_forms_test_util.h"

namespace kiln::testing {
namespace {

namespace cg = codegen::cuda;

// An H200 as compile_cuda sees it (kiln dump --sm90).
cg::CudaEmitOptions h200() {
  cg::CudaEmitOptions o;
  o.device.compute_major = 9;
  o.device.shared_per_block = 227 * 1024 - 1024;
  o.device.shared_per_multiprocessor = 228 * 1024;
  return o;
}

cg::CudaEmitOptions forcing(cg::CudaEmitOptions o, const std::string& form) {
  o.rows.form = form;
  return o;
}

bool staged(const cg::CudaKernelSource& k) { return k.source.find("(one block per row)") != std::string::npos; }

// On an H200: a 64 KiB row is one block with a bulk ring; a 512 KiB row is split over a cluster
// by mail with the register prefetch; an 8 KiB row is register rows in one block; a row longer
// than 16 blocks of 1024 threads hold is staged rows.
TEST(CudaRowFormSelection, TheFormsAreTriedInOrderOfPreference) {
  auto bulk = row_kernel(Op::Softmax, DType::BF16, 2, 32768, h200(), "_auto");
  EXPECT_EQ(bulk.cluster, 1);
  EXPECT_EQ(bulk.bulk_stages, 3) << bulk.source;
  auto mail = row_kernel(Op::Softmax, DType::BF16, 2, 262144, h200(), "_auto");
  EXPECT_EQ(mail.cluster, 8);
  EXPECT_EQ(mail.bulk_stages, 0);
  EXPECT_NE(mail.source.find("kiln_mail_init<0>();"), std::string::npos) << mail.source;
  auto registers = row_kernel(Op::Softmax, DType::BF16, 64, 4096, h200(), "_auto");
  EXPECT_NE(registers.source.find("rows in registers: 256 threads x 16 elements"), std::string::npos) << registers.source;
  EXPECT_EQ(registers.cluster, 1);
  EXPECT_EQ(registers.bulk_stages, 0);
  auto too_long = row_kernel(Op::Softmax, DType::BF16, 2, 1 << 20, h200(), "_auto");
  EXPECT_TRUE(staged(too_long)) << too_long.source;
  // Without clusters (the default device) the 512 KiB row is staged too.
  EXPECT_TRUE(staged(row_kernel(Op::Softmax, DType::BF16, 2, 262144, cg::CudaEmitOptions{}, "_nocluster")));
}

// A forced form is taken wherever it applies, staged rows elsewhere.
TEST(CudaRowFormSelection, AFormCanBeForced) {
  auto shared = row_kernel(Op::Softmax, DType::BF16, 64, 4096, forcing(h200(), "staged_rows"), "_staged");
  EXPECT_TRUE(staged(shared)) << shared.source;
  EXPECT_NE(shared.source.find("kiln_copy_row<kiln_block, 4096>"), std::string::npos) << shared.source;
  // Register rows alone split a 64 KiB row over a cluster of 4 blocks of 256, each with its ring.
  auto registers = row_kernel(Op::Softmax, DType::BF16, 2, 32768, forcing(h200(), "register_rows"), "_registers");
  EXPECT_EQ(registers.cluster, 4) << registers.source;
  EXPECT_GT(registers.bulk_stages, 0) << registers.source;
  // Cluster mail on the same row: the cluster, mail and the register prefetch instead of a ring.
  auto mail = row_kernel(Op::Softmax, DType::BF16, 2, 32768, forcing(h200(), "cluster_mail"), "_mail");
  EXPECT_EQ(mail.cluster, 4) << mail.source;
  EXPECT_EQ(mail.bulk_stages, 0) << mail.source;
  EXPECT_NE(mail.source.find("kiln_mail_init<0>();"), std::string::npos) << mail.source;
  EXPECT_NE(mail.source.find("kiln_next0"), std::string::npos) << mail.source;
  // Where the forced form does not apply: 16 elements a thread are too few for bulk rows, and a
  // device without clusters has no mail.
  EXPECT_TRUE(staged(row_kernel(Op::Softmax, DType::BF16, 64, 4096, forcing(h200(), "bulk_rows"), "_bulk")));
  EXPECT_TRUE(staged(row_kernel(Op::Softmax, DType::BF16, 2, 32768, forcing({}, "cluster_mail"), "_nomail")));
  expect_kernels_compile({shared, registers, mail}, "forced_rows.cu");
}

// A form that does not exist is an error naming it and the forms there are, from the emitter and
// from compile_cuda before it needs a GPU.
TEST(CudaRowFormSelection, AnUnknownFormIsAClearError) {
  try {
    row_kernel(Op::Softmax, DType::F32, 4, 1000, forcing({}, "bulk"), "_unknown");
    ADD_FAILURE() << "no error for an unknown row form";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("unknown CUDA row form 'bulk'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("bulk_rows, cluster_mail, register_rows, staged_rows"), std::string::npos)
        << e.what();
  }
  Graph g("softmax");
  g.set_outputs({g.add(Op::Softmax, {g.add_input("x", TensorType{DType::F32, {SymInt(4), SymInt(8)}, Device::CPU})})});
  CudaCompileOptions o;
  o.row_form = "registers";
  try {
    compile_cuda(g, o);
    ADD_FAILURE() << "no error for an unknown row form";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("unknown CUDA row form 'registers'"), std::string::npos) << e.what();
  }
}

// Clusters and mail need sm_90; the knobs are clamped to what the hardware allows.
TEST(CudaRowFormSelection, TheDeviceLimitsTheForms) {
  cg::RowFormOptions o;
  o.registers.max_cluster = 40;
  o.registers.max_threads = 4096;
  o.registers.occupancy_threads = 1;
  cg::RowDevice sm80;
  sm80.compute_major = 8;
  cg::RowDevice sm90 = sm80;
  sm90.compute_major = 9;
  EXPECT_EQ(cg::with_device_limits(o, sm80).registers.max_cluster, 1);
  EXPECT_FALSE(cg::with_device_limits(o, sm80).mail.enabled);
  EXPECT_EQ(cg::with_device_limits(o, sm90).registers.max_cluster, 16);
  EXPECT_TRUE(cg::with_device_limits(o, sm90).mail.enabled);
  EXPECT_EQ(cg::with_device_limits(o, sm90).registers.max_threads, 1024);
  EXPECT_EQ(cg::with_device_limits(o, sm90).registers.occupancy_threads, 32);
}

// FNV-1a: a stable hash of kernel text.
uint64_t fnv1a(const std::string& s, uint64_t h = 1469598103934665603ull) {
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

std::unique_ptr<Graph> row_graph(const std::string& which, DType t, int64_t rows, int64_t cols) {
  auto g = std::make_unique<Graph>("rows");
  Value* x = g->add_input("x", TensorType{t, {SymInt(rows), SymInt(cols)}, Device::CPU});
  auto weights = [&] { return g->add_input("w", TensorType{t, {SymInt(cols)}, Device::CPU}); };
  Value* y = nullptr;
  if (which == "softmax") y = g->add(Op::Softmax, {x});
  else if (which == "log_softmax") y = g->add(Op::LogSoftmax, {x});
  else if (which == "layer_norm") { Value* w = weights(); y = g->add(Op::LayerNorm, {x, w, w}); }
  else if (which == "rms_norm") y = g->add(Op::RmsNorm, {x, weights()});
  else if (which == "residual_norm") {
    Value* w = weights();
    Value* r = g->add_input("r", TensorType{t, {SymInt(rows), SymInt(cols)}, Device::CPU});
    y = g->add(Op::LayerNorm, {g->add(Op::Add, {x, r}), w, w});
  } else if (which == "reduce_sum") y = g->add(Op::ReduceSum, {x}, {{"axes", std::vector<int64_t>{1}}});
  else y = g->add(Op::ReduceMax, {x}, {{"axes", std::vector<int64_t>{1}}, {"keepdim", int64_t(1)}});
  g->set_outputs({y});
  return g;
}

// Every op of these row graphs at widths 1000 to 262144 in f32, f16 and bf16, for the default
// device, an H200 and three of the codegen tests' options, hashed per (op, options): the kernels
// (text and launch shape) the code printed before the row forms became modules, byte for byte. A
// deliberate change to a form's kernels changes these: the test prints the new table, and
// KILN_ROW_KERNELS_DUMP=file writes the kernels to diff.
TEST(CudaRowFormSelection, TheRowKernelsMatchTheRecordedOnes) {
  const std::map<std::string, uint64_t> recorded = {
    {"softmax default", 0xcf8291acf00fd831ull},
    {"softmax h200", 0x08bb9732c8697e39ull},
    {"softmax cluster8", 0x8e7bf27e7f025d3full},
    {"softmax bulk", 0x550380e5898b883bull},
    {"softmax mail", 0x08bb9732c8697e39ull},
    {"log_softmax default", 0x3d7c47e1533442d3ull},
    {"log_softmax h200", 0x9fde94126fe200b3ull},
    {"log_softmax cluster8", 0x424e9419cb379f4dull},
    {"log_softmax bulk", 0x3da3cd49e079fc0full},
    {"log_softmax mail", 0x9fde94126fe200b3ull},
    {"layer_norm default", 0x962a32d74a50fa83ull},
    {"layer_norm h200", 0x526f0152b0a34e75ull},
    {"layer_norm cluster8", 0x27f4c9bec4c8b4e6ull},
    {"layer_norm bulk", 0x4db17e890d5f8cbfull},
    {"layer_norm mail", 0x526f0152b0a34e75ull},
    {"rms_norm default", 0x058ce53db3c7cb08ull},
    {"rms_norm h200", 0x37c3d7b236325433ull},
    {"rms_norm cluster8", 0x4f859b40a7a7061dull},
    {"rms_norm bulk", 0x37c3d7b236325433ull},
    {"rms_norm mail", 0x37c3d7b236325433ull},
    {"residual_norm default", 0xe73ca1597394f160ull},
    {"residual_norm h200", 0x951ca8d4cbcea987ull},
    {"residual_norm cluster8", 0x4b2839c5f3aec639ull},
    {"residual_norm bulk", 0x99bac44555b436a3ull},
    {"residual_norm mail", 0x951ca8d4cbcea987ull},
    {"reduce_sum default", 0xd7a614cff5386198ull},
    {"reduce_sum h200", 0x94c86d844d6e3c5cull},
    {"reduce_sum cluster8", 0x3fb4374b43ef8c4cull},
    {"reduce_sum bulk", 0x94c86d844d6e3c5cull},
    {"reduce_sum mail", 0x94c86d844d6e3c5cull},
    {"reduce_max default", 0x834c682041bc88c0ull},
    {"reduce_max h200", 0x1f05dd95f11a390eull},
    {"reduce_max cluster8", 0x69cd76e273779f4cull},
    {"reduce_max bulk", 0x1f05dd95f11a390eull},
    {"reduce_max mail", 0x1f05dd95f11a390eull},
  };
  std::vector<std::pair<std::string, cg::CudaEmitOptions>> options = {
      {"default", {}}, {"h200", h200()}, {"cluster8", cluster_emit_options(8)}, {"bulk", bulk_emit_options()}};
  options.push_back({"mail", bulk_emit_options()});
  options.back().second.rows.mail.enabled = true;
  const char* dump = std::getenv("KILN_ROW_KERNELS_DUMP");
  std::ofstream out;
  if (dump) out.open(dump);
  std::ostringstream table;
  int changed = 0;
  for (const char* op : {"softmax", "log_softmax", "layer_norm", "rms_norm", "residual_norm", "reduce_sum", "reduce_max"})
    for (const auto& [name, o] : options) {
      uint64_t h = fnv1a("");
      for (int64_t cols : {1000, 4096, 32768, 262144})
        for (DType t : {DType::F32, DType::F16, DType::BF16}) {
          auto g = row_graph(op, t, cols <= 4096 ? 64 : 8, cols);
          auto low = runtime::lower_for_target(*g, CompileOptions{}, "kiln_");
          for (const auto& lk : low->kernels) {
            auto k = cg::emit_cuda_kernel(lk.kernel, o);
            const std::string text = str(k.name, " threads ", k.block_threads, " shared ", k.shared_bytes, " cluster ",
                                         k.cluster, " bulk ", k.bulk_stages, " staged ", k.staged_buffers, "\n", k.source);
            h = fnv1a(text, h);
            if (dump) out << "==== " << op << " " << name << " " << dtype_name(t) << " " << cols << " " << text;
          }
        }
      const std::string key = str(op, " ", name);
      std::ostringstream hex;
      hex << "0x" << std::hex << std::setw(16) << std::setfill('0') << h << "ull";
      table << "    {\"" << key << "\", " << hex.str() << "},\n";
      auto it = recorded.find(key);
      changed += it == recorded.end() || it->second != h;
      EXPECT_TRUE(it != recorded.end() && it->second == h) << key << ": the kernels changed";
    }
  if (changed) std::cout << "`recorded` for the kernels as they are now:\n" << table.str();
}

}  // namespace
}  // namespace kiln::testing

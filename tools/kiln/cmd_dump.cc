// `kiln dump [MODEL] --dir D`: every stage on disk: the graph as captured, the IR after every pass
// (the pass manager's dump_dir / KILN_DUMP mechanism), the compiler's explain report, the Loop IR,
// the generated source, and Graphviz pictures (graph.dot; fused.dot with groups coloured).
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <set>
#include <utility>

#include "commands.h"
#include "graph_render.h"
#include "ir/text_syntax.h"
#include "kiln/error.h"
#include "kiln/passes.h"
#include "model_source.h"
#include "progress.h"
#include "codegen/cuda/attention_kernel.h"
#include "codegen/cuda/cuda_emitter.h"
#include "runtime/cuda_lowering.h"
#include "kiln/cuda.h"
#include "kiln/target.h"
#include "runtime/executable.h"

namespace kiln::cli {

namespace {
void write(const std::filesystem::path& p, const std::string& text) {
  std::ofstream out(p, std::ios::trunc);
  out << text;
  out.close();
  KILN_CHECK(out.good(), "kiln dump: cannot write ", p.string());
}
}  // namespace

Command add_dump_command(CLI::App& parent) {
  struct Options {
    std::string model, dir;
    std::vector<std::string> dims;
    bool sm90 = false;
    bool full_weights = false;
  };
  auto o = std::make_shared<Options>();
  CLI::App* app = parent.add_subcommand(
      "dump", "Write the IR after every stage (each pass, Loop IR, generated source) and Graphviz pictures of "
              "the graph with fused groups coloured into a directory");
  app->add_option("model", o->model, "An ONNX model (.onnx); none: the built-in transformer block");
  app->add_option("--dir", o->dir, "The directory to write (created if missing)")->required();
  app->add_option("--dim", o->dims, "NAME=VALUE: fix a symbolic dim at import");
  app->add_flag("--sm90", o->sm90,
                "Write kernels.cu as compile_cuda does for an sm_90 GPU (H100/H200): thread-block clusters of up "
                "to 16 blocks, 226 KiB of shared memory a block (default: no clusters, 48 KiB)");
  app->add_flag("--full-weights", o->full_weights,
                "Print every constant's values in the .kir files (default: constants over 64 KiB print as their "
                "shape, `\"elided: N bytes\"`, so a real model's dump stays megabytes, not gigabytes)");
  return Command{app, [o](const GlobalOptions& global) {
                   namespace fs = std::filesystem;
                   text_syntax::TensorElision elide(o->full_weights ? SIZE_MAX - 1 : text_syntax::kDumpTensorBytes);
                   const fs::path dir(o->dir);
                   std::error_code ec;
                   fs::create_directories(dir / "passes", ec);
                   KILN_CHECK(fs::is_directory(dir / "passes"), "--dir ", o->dir, ": cannot create it",
                              ec ? ": " + ec.message() : "");
                   ModelSource m = load_model_source(o->model, parse_dims(o->dims), 0);
                   write(dir / "00-input.kir", print_graph(*m.graph));
                   write(dir / "graph.dot", m.graph->to_dot());
                   OptimizeOptions opt = cpu_target().optimize_options();
                   opt.dump_dir = (dir / "passes").string();
                   OptimizeReport report;
                   CompileForOptions how;
                   how.optimizer = &opt;
                   how.report = &report;
                   CompileOptions copts;
                   copts.num_threads = global.threads;
                   progress("compiling");
                   auto exe = compile_for(*m.graph, cpu_target(), copts, how);
                   progress_done();
                   write(dir / "passes.txt", report.pass_stats.to_string());
                   write(dir / "optimized.kir", print_graph(*report.optimized));
                   const auto& ce = dynamic_cast<const runtime::CompiledExecutable&>(*exe);
                   write(dir / "lowered.kir", print_graph(*ce.graph));  // after decomposition for fusion
                   std::string loop_ir;
                   for (const auto& k : ce.kernels) loop_ir += lower::print_kernel(k.kernel) + "\n";
                   write(dir / "loop_ir.txt", loop_ir);
                   write(dir / "program.txt", lower::print_program(ce));
                   write(dir / "kernels.cc", exe->source());
                   // The CUDA target's kernels (its own lowering: the CPU keeps values in output rows
                   // between passes, the GPU stages rows in shared memory), from the graph optimised
                   // and prepared as `kiln run --device cuda` does (attention kept whole for its fused
                   // kernel). Text only: no GPU needed.
                   std::vector<codegen::cuda::CudaKernelSource> cuda_kernels;
                   std::unique_ptr<Graph> gpu_graph = m.graph->clone();
                   optimize(*gpu_graph, cuda_target()->optimize_options());
                   // As compile_cuda lowers it; a graph the GPU cannot run yet (an op without a CUDA
                   // kernel) still gets the kernels of the rest, and program-cuda.txt says why.
                   const runtime::CudaLowering gpu = runtime::lower_for_cuda(*gpu_graph, copts, /*fused_attention=*/true, "kiln_");
                   const auto& gpu_lowered = gpu.program;
                   write(dir / "program-cuda.txt",
                         (gpu.refusal.empty() ? "" : "compile_cuda refuses this graph: " + gpu.refusal + "\n\n") +
                             lower::print_program(*gpu_lowered));
                   const std::set<codegen::cuda::FusedAttentionKernel>& attention = gpu.placement.attention_kernels;
                   codegen::cuda::CudaEmitOptions emit;
                   if (o->sm90) emit.device = codegen::cuda::RowDevice::sm90();  // as compile_cuda sees an H200
                   for (const auto& k : gpu_lowered->kernels)
                     cuda_kernels.push_back(codegen::cuda::emit_cuda_kernel(k.kernel, emit));
                   write(dir / "kernels.cu", codegen::cuda::cuda_translation_unit(cuda_kernels).source +
                                                 codegen::cuda::fused_attention_source(attention));
                   write(dir / "explain.txt", exe->explain());
                   write(dir / "fused.dot", fused_graph_dot(ce));
                   size_t pass_files = 0;
                   for (const auto& e : fs::directory_iterator(dir / "passes")) pass_files += e.is_regular_file();
                   std::cout << "kiln dump: " << m.label << " -> " << o->dir << "\n"
                             << "  00-input.kir, graph.dot       the graph as captured/imported\n"
                             << "  passes/ (" << pass_files << " files)           the IR after every pass run\n"
                             << "  passes.txt, optimized.kir     pass statistics and the optimised graph\n"
                             << "  lowered.kir                   after decomposition for fusion\n"
                             << "  fused.dot                     the graph with one colour per kernel (dot -Tsvg)\n"
                             << "  program.txt                   the program: steps (kernels, library calls, host steps) over planned buffers\n"
                             << "  loop_ir.txt, kernels.cc       Loop IR and the generated C++\n"
                             << "  program-cuda.txt              the same program as compile_cuda runs it\n"
                             << "  kernels.cu                    the kernels as the CUDA target writes them\n"
                             << "  explain.txt                   fusion decisions, memory plan, compiler command\n";
                   return 0;
                 }};
}

}  // namespace kiln::cli

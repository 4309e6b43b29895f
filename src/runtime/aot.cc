// Ahead-of-time artefacts (see include/kiln/aot.h). Large tensor literals of the printed graph move
// to weights.bin (the text keeps "@weights:OFFSET:BYTES" in their place), so graph.kir stays
// readable and the weights stay binary; loading substitutes the bytes back before parsing.
#include "kiln/aot.h"

#include <xxhash.h>

#include <cctype>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "codegen/cpu/cpu_jit.h"
#include "kiln/error.h"
#include "runtime/prebuilt.h"

namespace kiln {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr const char* kFormat = "kiln-compiled-artefact";
constexpr size_t kMinExternalBytes = 256;  // smaller literals stay inline in graph.kir

std::string read_all(const fs::path& p, const char* what) {
  std::ifstream in(p, std::ios::binary);
  KILN_CHECK(bool(in), "compiled artefact: cannot read the ", what, " ", p.string());
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void write_all(const fs::path& p, const std::string& data) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out.write(data.data(), std::streamsize(data.size()));
  out.close();
  KILN_CHECK(out.good(), "compiled artefact: cannot write ", p.string());
}

std::string hash128(const std::string& bytes) {
  XXH128_hash_t h = XXH3_128bits(bytes.data(), bytes.size());
  char buf[40];
  std::snprintf(buf, sizeof buf, "%016llx%016llx", static_cast<unsigned long long>(h.high64),
                static_cast<unsigned long long>(h.low64));
  return buf;
}

json file_entry(const std::string& name, const std::string& bytes) {
  return {{"path", name}, {"bytes", bytes.size()}, {"xxh3_128", hash128(bytes)}};
}

// Checks a file against its manifest entry; returns its bytes.
std::string read_checked(const fs::path& dir, const json& entry, const char* what) {
  const std::string name = entry.at("path").get<std::string>();
  KILN_CHECK(name.find('/') == std::string::npos && name.find("..") == std::string::npos,
             "compiled artefact ", dir.string(), ": manifest names a file outside the artefact: ", name);
  std::string bytes = read_all(dir / name, what);
  KILN_CHECK(bytes.size() == entry.at("bytes").get<size_t>() && hash128(bytes) == entry.at("xxh3_128").get<std::string>(),
             "compiled artefact: ", (dir / name).string(), " is corrupt or was modified (size or checksum differs "
             "from manifest.json); re-create it with `kiln compile`");
  return bytes;
}

bool is_hex(char c) { return std::isdigit(static_cast<unsigned char>(c)) || (c >= 'a' && c <= 'f'); }

// Moves "0x..." hex literals of at least kMinExternalBytes into `weights`.
std::string externalize(const std::string& text, std::string& weights) {
  std::string out;
  out.reserve(text.size() / 4);
  size_t i = 0;
  while (i < text.size()) {
    size_t q = text.find("\"0x", i);
    if (q == std::string::npos) break;
    size_t e = q + 3;
    while (e < text.size() && is_hex(text[e])) ++e;
    size_t digits = e - q - 3;
    if (e < text.size() && text[e] == '"' && digits % 2 == 0 && digits / 2 >= kMinExternalBytes) {
      out.append(text, i, q - i);
      size_t offset = weights.size();
      for (size_t k = q + 3; k < e; k += 2) {
        auto nib = [](char c) { return c <= '9' ? c - '0' : c - 'a' + 10; };
        weights.push_back(char(nib(text[k]) * 16 + nib(text[k + 1])));
      }
      out += str("\"@weights:", offset, ":", digits / 2, "\"");
      i = e + 1;  // past the closing quote
    } else {
      out.append(text, i, e - i);
      i = e;
    }
  }
  out.append(text, std::min(i, text.size()), std::string::npos);
  return out;
}

std::string internalize(const std::string& text, const std::string& weights, const std::string& where) {
  static const char* hex = "0123456789abcdef";
  std::string out;
  size_t i = 0;
  const std::string marker = "\"@weights:";
  while (true) {
    size_t q = text.find(marker, i);
    if (q == std::string::npos) break;
    size_t end = text.find('"', q + 1);
    KILN_CHECK(end != std::string::npos, where, ": unterminated weights reference");
    unsigned long long offset = 0, bytes = 0;
    std::string ref = text.substr(q + marker.size(), end - q - marker.size());
    KILN_CHECK(std::sscanf(ref.c_str(), "%llu:%llu", &offset, &bytes) == 2 && offset + bytes <= weights.size(),
               where, ": weights reference '", ref, "' is outside weights.bin (", weights.size(), " bytes)");
    out.append(text, i, q - i);
    out += "\"0x";
    for (size_t k = 0; k < bytes; ++k) {
      auto b = static_cast<unsigned char>(weights[offset + k]);
      out += hex[b >> 4];
      out += hex[b & 15];
    }
    out += '"';
    i = end + 1;
  }
  out.append(text, i, std::string::npos);
  return out;
}

json value_entry(const Value* v) {
  json shape = json::array();
  for (const SymInt& d : v->type.shape) {
    if (auto c = d.maybe_constant()) shape.push_back(*c);
    else shape.push_back(d.to_string());
  }
  return {{"name", v->name}, {"dtype", std::string(dtype_name(v->type.dtype))}, {"shape", shape}};
}

}  // namespace

bool is_compiled_artefact(const std::string& path) {
  std::error_code ec;
  return fs::is_directory(path, ec) && fs::is_regular_file(fs::path(path) / "manifest.json", ec);
}

void save_compiled(const Graph& graph, const Executable& exe, const std::string& dir, const CompileOptions& options) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  KILN_CHECK(fs::is_directory(dir), "compiled artefact: cannot create directory ", dir, ec ? ": " + ec.message() : "");
  const CompileStats& stats = exe.stats();
  std::string so_bytes;
  if (!stats.shared_object.empty()) so_bytes = read_all(stats.shared_object, "compiled shared object");
  std::string weights;
  std::string text = externalize(print_graph(graph), weights);

  // The flags the kernels were compiled with (compile()'s: this CPU's x86-64 level).
  codegen::cpu::CompilerConfig cfg = codegen::cpu::default_compiler(options.march_native, options.extra_flags, /*host_isa=*/true);
  json m;
  m["format"] = kFormat;
  m["format_version"] = kArtefactFormatVersion;
  m["model"] = graph.name();
  m["inputs"] = json::array();
  for (const Value* v : graph.inputs()) m["inputs"].push_back(value_entry(v));
  m["outputs"] = json::array();
  for (const Value* v : graph.outputs()) m["outputs"].push_back(value_entry(v));
  m["cache_key"] = stats.cache_key;
  m["source_hash"] = hash128(exe.source());
  m["compiler"] = {{"identity", cfg.identity}, {"cxx", cfg.cxx}, {"flags", cfg.flags}};
  m["compile_options"] = {{"fuse", options.fuse},
                          {"decompose", options.decompose},
                          {"parallel_threshold", options.parallel_threshold},
                          {"march_native", options.march_native},
                          {"extra_flags", options.extra_flags}};
  m["kernels_generated"] = stats.kernels_generated;
  m["library_calls"] = stats.library_calls;
  m["files"] = {{"graph", file_entry("graph.kir", text)}, {"weights", file_entry("weights.bin", weights)},
                {"source", file_entry("kernels.cc", exe.source())}};
  if (!so_bytes.empty()) m["files"]["shared_object"] = file_entry("kernels.so", so_bytes);

  const fs::path d(dir);
  write_all(d / "graph.kir", text);
  write_all(d / "weights.bin", weights);
  write_all(d / "kernels.cc", exe.source());
  if (!so_bytes.empty()) write_all(d / "kernels.so", so_bytes);
  else fs::remove(d / "kernels.so", ec);
  write_all(d / "manifest.json", m.dump(2) + "\n");  // last: a half-written artefact has no manifest
  load_compiled_artefact(dir);                         // proves the artefact round-trips
}

CompiledArtefact load_compiled_artefact(const std::string& dir, int num_threads) {
  const fs::path d(dir);
  KILN_CHECK(fs::is_directory(d), "compiled artefact: ", dir, " is not a directory (create one with `kiln compile MODEL -o ", dir, "`)");
  std::string manifest_text = read_all(d / "manifest.json", "manifest");
  json m;
  try {
    m = json::parse(manifest_text);
  } catch (const json::exception& e) {
    throw Error(str("compiled artefact: ", (d / "manifest.json").string(), " is not valid JSON: ", e.what()));
  }
  try {
    KILN_CHECK(m.value("format", "") == kFormat, (d / "manifest.json").string(), " is not a Kiln artefact manifest (format '",
               m.value("format", ""), "')");
    int version = m.at("format_version").get<int>();
    KILN_CHECK(version == kArtefactFormatVersion, (d / "manifest.json").string(), ": format version ", version,
               " is not supported (this kiln reads version ", kArtefactFormatVersion, "); re-create it with `kiln compile`");
    const json& files = m.at("files");
    std::string weights = read_checked(d, files.at("weights"), "weights");
    std::string text = internalize(read_checked(d, files.at("graph"), "graph"), weights, (d / "graph.kir").string());
    std::unique_ptr<Graph> g;
    try {
      g = parse_graph(text);
    } catch (const Error& e) {
      throw Error(str((d / "graph.kir").string(), ": ", e.what()));
    }
    CompileOptions opt;
    opt.num_threads = num_threads;
    const json& co = m.at("compile_options");
    opt.fuse = co.at("fuse").get<bool>();
    opt.decompose = co.at("decompose").get<bool>();
    opt.parallel_threshold = co.at("parallel_threshold").get<int64_t>();
    opt.march_native = co.at("march_native").get<bool>();
    opt.extra_flags = co.at("extra_flags").get<std::vector<std::string>>();
    // Kernels compiled for an x86-64 level this CPU lacks would die of SIGILL at their first AVX
    // instruction: say so instead.
    const std::string here = codegen::cpu::cpu_isa_level();
    for (const std::string& f : m.at("compiler").at("flags").get<std::vector<std::string>>()) {
      const bool v4 = f == "-march=x86-64-v4", v3 = f == "-march=x86-64-v3";
      KILN_CHECK(!(v4 && here != "x86-64-v4") && !(v3 && here.empty()), "compiled artefact ", dir,
                 ": its kernels were compiled for ", f.substr(7), v4 ? " (AVX-512)" : " (AVX2)", " and this CPU is ",
                 here.empty() ? "below x86-64-v3" : here, "; re-create it here with `kiln compile`");
    }
    std::string so_path;
    if (files.contains("shared_object")) {
      read_checked(d, files.at("shared_object"), "compiled shared object");
      so_path = fs::absolute(d / files.at("shared_object").at("path").get<std::string>()).string();
    }
    const std::string want = m.at("source_hash").get<std::string>();
    auto check = [&](const std::string& source) {
      KILN_CHECK(hash128(source) == want, "compiled artefact ", dir, ": the kernels this kiln generates for graph.kir "
                 "(source hash ", hash128(source), ") differ from the ones in kernels.so (", want,
                 "): the artefact was made by a different Kiln version; re-create it with `kiln compile`");
      KILN_CHECK(!source.empty() || so_path.empty(), "compiled artefact ", dir, ": no kernels expected");
    };
    CompiledArtefact out;
    out.executable = runtime::link_prebuilt(*g, opt, so_path, check);
    out.graph = std::shared_ptr<const Graph>(std::move(g));
    out.manifest_json = std::move(manifest_text);
    return out;
  } catch (const json::exception& e) {
    throw Error(str("compiled artefact: ", (d / "manifest.json").string(), " lacks a field or has a wrong type: ", e.what()));
  }
}

std::shared_ptr<Executable> load_compiled(const std::string& dir, int num_threads) {
  return load_compiled_artefact(dir, num_threads).executable;
}

}  // namespace kiln

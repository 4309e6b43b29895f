// FuzzCase inputs and the .kir regression format (see fuzz_case.h).
#include "fuzz/fuzz_case.h"

#include <cmath>
#include <limits>
#include <random>
#include <sstream>

#include "kiln/error.h"

namespace kiln::fuzz {

namespace {

uint64_t mix(uint64_t h, uint64_t v) {  // splitmix64 step over a running hash
  h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  h += 0x9e3779b97f4a7c15ull;
  h = (h ^ (h >> 30)) * 0xbf58476d1ce4e5b9ull;
  h = (h ^ (h >> 27)) * 0x94d049bb133111ebull;
  return h ^ (h >> 31);
}

uint64_t name_hash(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (char c : s) h = (h ^ uint8_t(c)) * 1099511628211ull;
  return h;
}

// The smallest positive subnormal-ish value of d (a few ulps above it, so rounding keeps it subnormal).
double denormal(DType d) {
  switch (d) {
    case DType::F64: return 3e-310;
    case DType::F16: return 1.2e-7;
    default: return 3e-40;  // f32, bf16
  }
}

}  // namespace

FuzzCase FuzzCase::clone() const {
  FuzzCase c;
  c.graph = graph->clone();
  c.specs = specs;
  c.bindings = bindings;
  c.input_seed = input_seed;
  c.special_rate = special_rate;
  c.note = note;
  return c;
}

std::vector<HostTensor> make_inputs(const FuzzCase& c) {
  std::vector<HostTensor> out;
  for (const Value* in : c.graph->inputs()) {
    auto it = c.specs.find(in->name);
    InputSpec s = it == c.specs.end() ? InputSpec{} : it->second;
    std::vector<int64_t> dims;
    for (const SymInt& d : in->type.shape) dims.push_back(d.evaluate(c.bindings));
    const DType dt = in->type.dtype;
    double lo = s.lo, hi = s.hi;
    if (dt == DType::U8) lo = std::max(lo, 0.0);
    const uint64_t seed = mix(c.input_seed, name_hash(in->name));
    HostTensor h = HostTensor::random(dt, dims, seed, lo, hi);
    std::mt19937_64 rng(mix(seed, 17));
    std::uniform_real_distribution<double> u(0, 1);
    const double specials[] = {NAN, INFINITY, -INFINITY, -0.0, denormal(dt), -denormal(dt)};
    for (int64_t k = 0; k < h.numel(); ++k) {
      if (s.avoid_zero && h.get_f64(k) == 0) h.set_f64(k, hi > 1 ? 1 : hi);
      if (s.specials && is_float(dt) && u(rng) < c.special_rate) h.set_f64(k, specials[rng() % 6]);
    }
    out.push_back(std::move(h));
  }
  return out;
}

std::string to_kir(const FuzzCase& c) {
  std::ostringstream o;
  o.precision(17);
  o << "// fuzz-diff regression (tests/fuzz/README in docs/testing.md): inputs from the header below\n";
  if (!c.note.empty()) {
    std::istringstream lines(c.note);
    for (std::string l; std::getline(lines, l);) o << "// note: " << l << "\n";
  }
  o << "// fuzz-seed: " << c.input_seed << " " << c.special_rate << "\n";
  for (const auto& [name, v] : c.bindings) o << "// fuzz-bind: " << name << " " << v << "\n";
  for (const Value* in : c.graph->inputs()) {
    auto it = c.specs.find(in->name);
    if (it == c.specs.end()) continue;
    const InputSpec& s = it->second;
    o << "// fuzz-input: " << in->name << " " << s.lo << " " << s.hi << " " << int(s.avoid_zero) << " "
      << int(s.specials) << "\n";
  }
  o << print_graph(*c.graph);
  return o.str();
}

FuzzCase from_kir(const std::string& text) {
  FuzzCase c;
  std::istringstream lines(text);
  bool seen_seed = false;
  for (std::string l; std::getline(lines, l);) {
    std::istringstream f(l);
    std::string tag;
    f >> tag;
    if (tag != "//") continue;
    f >> tag;
    if (tag == "fuzz-seed:") {
      KILN_CHECK(bool(f >> c.input_seed >> c.special_rate), "fuzz case: bad header line '", l, "'");
      seen_seed = true;
    } else if (tag == "fuzz-bind:") {
      std::string name;
      int64_t v = 0;
      KILN_CHECK(bool(f >> name >> v), "fuzz case: bad header line '", l, "'");
      c.bindings[name] = v;
    } else if (tag == "fuzz-input:") {
      std::string name;
      InputSpec s;
      int az = 0, sp = 0;
      KILN_CHECK(bool(f >> name >> s.lo >> s.hi >> az >> sp), "fuzz case: bad header line '", l, "'");
      s.avoid_zero = az != 0;
      s.specials = sp != 0;
      c.specs[name] = s;
    } else if (tag == "note:") {
      std::string rest;
      std::getline(f, rest);
      c.note += (c.note.empty() ? "" : "\n") + rest.substr(rest.empty() ? 0 : 1);
    }
  }
  KILN_CHECK(seen_seed, "fuzz case: no '// fuzz-seed:' header line");
  c.graph = parse_graph(text);
  return c;
}

}  // namespace kiln::fuzz

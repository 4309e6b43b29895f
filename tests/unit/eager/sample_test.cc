// The `sample` op: Philox4x32-10 against Random123's published known answers; the CPU kernel
// (src/kernels/cpu/sample.cc) against the reference kernel, token for token, over every option,
// dtype and odd vocabulary size; the distribution of many draws against the filtered softmax
// computed here independently (chi-square, fixed seed, stated threshold, and the same statistic
// against the unfiltered softmax must fail it); batch-composition independence; edge cases and the
// errors for bad logits and settings. Why: a sampler that is subtly wrong still produces plausible
// tokens, so only counts and exact agreement catch it.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "common/compare.h"
#include "kernels/cpu/eager.h"
#include "kernels/cpu/philox_simd.h"
#include "kiln/error.h"
#include "kiln/interp.h"
#include "kiln/sampling.h"

namespace kiln::testing {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

HostTensor i64s(const std::vector<int64_t>& v) {
  HostTensor t = HostTensor::empty(DType::I64, {int64_t(v.size())});
  std::copy(v.begin(), v.end(), t.data<int64_t>());
  return t;
}

std::vector<int64_t> tokens_of(const HostTensor& t) { return {t.data<int64_t>(), t.data<int64_t>() + t.numel()}; }

Attrs options(double temperature, int64_t top_k, double top_p, double min_p) {
  return {{"temperature", temperature}, {"top_k", top_k}, {"top_p", top_p}, {"min_p", min_p}};
}

// Runs the CPU kernel and the reference; they must agree, and the kernel must be the fast one.
std::vector<int64_t> expect_kernel_matches(const std::vector<HostTensor>& in, const Attrs& attrs, const std::string& label) {
  SCOPED_TRACE(label);
  std::vector<HostTensor> want = interp::run_op(Op::Sample, attrs, in);
  Scoreboard sb;
  std::vector<HostTensor> got = eager::run_op(Op::Sample, attrs, in, &sb);
  EXPECT_EQ(tokens_of(got[0]), tokens_of(want[0]));
  EXPECT_EQ(sb.kernels().at(0).name.find("(reference)"), std::string::npos) << sb.kernels()[0].name;
  return tokens_of(got[0]);
}

TEST(Philox, RandomOneTwoThreeKnownAnswers) {
  EXPECT_EQ(philox4x32_10({0, 0, 0, 0}, {0, 0}), (PhiloxCounter{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}));
  EXPECT_EQ(philox4x32_10({0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}, {0xffffffff, 0xffffffff}),
            (PhiloxCounter{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}));
  EXPECT_EQ(philox4x32_10({0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}, {0xa4093822, 0x299f31d0}),
            (PhiloxCounter{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}));
}

TEST(Philox, LargestGumbelBoundsEveryDraw) {
  const double highest = gumbel_of((4294967295.0 + 0.5) * 0x1.0p-32);
  EXPECT_LT(highest, kLargestGumbel);
  EXPECT_GT(highest, kLargestGumbel - 0.01) << "the bound is tight (a looser one only costs time)";
  // Four consecutive tokens share one Philox call; the words differ.
  EXPECT_NE(sample_uniform(1, 2, 4), sample_uniform(1, 2, 5));
  EXPECT_NE(sample_uniform(1, 2, 4), sample_uniform(1, 3, 4));
  EXPECT_NE(sample_uniform(1, 2, 4), sample_uniform(2, 2, 4));
}

// The sixteen-block Philox of the unfiltered draw (AVX2 where the CPU has it) against the scalar one,
// across a carry into the counter's high word and with keys and steps using all 64 bits.
TEST(Philox, SixteenBlocksAtOnceMatchTheScalarGenerator) {
  for (uint64_t first : {uint64_t(0), uint64_t(0xfffffff9ull), uint64_t(0x123456789abcull)})
    for (uint64_t seed : {uint64_t(0), uint64_t(0xdeadbeefcafef00dull)})
      for (uint64_t step : {uint64_t(0), uint64_t(0x1122334455667788ull)}) {
        uint32_t words[64];
        eager::detail::philox_16_blocks(first, step, seed, words);
        for (uint64_t i = 0; i < 16; ++i) {
          const uint64_t b = first + i;
          const PhiloxCounter want = philox4x32_10({uint32_t(b), uint32_t(b >> 32), uint32_t(step), uint32_t(step >> 32)},
                                                   {uint32_t(seed), uint32_t(seed >> 32)});
          for (size_t j = 0; j < 4; ++j) EXPECT_EQ(words[4 * i + j], want[j]) << "block " << b << ", word " << j;
        }
      }
}

TEST(EagerSample, MatchesTheReferenceForEveryOptionAndDtype) {
  struct Config { double temperature; int64_t top_k; double top_p, min_p; };
  const std::vector<Config> configs = {
      {1.0, 0, 1.0, 0.0},  {0.7, 50, 0.9, 0.0},  {0.7, 0, 0.9, 0.0}, {1.3, 0, 1.0, 0.05}, {0.5, 7, 1.0, 0.1},
      {0.0, 0, 1.0, 0.0},  {2.0, 1, 1.0, 0.0},   {1.0, 0, 0.3, 0.2}, {0.9, 100000, 0.95, 0.0}, {1e-6, 5, 0.5, 0.0},
  };
  for (DType d : {DType::F32, DType::F64, DType::F16, DType::BF16})
    for (int64_t vocab : {1, 7, 997, 50257}) {
      if (vocab == 50257 && d != DType::F32 && d != DType::BF16) continue;
      const int64_t rows = 5;
      HostTensor logits = HostTensor::random(d, {rows, vocab}, uint64_t(vocab) + 3, -4, 4);
      if (vocab > 7) logits.set_f64(3, -kInf);  // a masked token
      std::vector<HostTensor> in = {logits, i64s({11, 12, 13, 14, 1ll << 40}), i64s({0, 1, 2, 3, 77})};
      for (const Config& c : configs)
        expect_kernel_matches(in, options(c.temperature, c.top_k, c.top_p, c.min_p),
                              str(dtype_name(d), " V=", vocab, " T=", c.temperature, " k=", c.top_k, " p=", c.top_p,
                                  " min_p=", c.min_p));
    }
}

TEST(EagerSample, PerRowOperandsAndPenaltiesMatchTheReference) {
  const int64_t rows = 6, vocab = 1031;
  HostTensor logits = HostTensor::random(DType::F32, {rows, vocab}, 5, -3, 3);
  HostTensor temperature = HostTensor::from_doubles(DType::F32, {rows}, {0.7, 1.0, 0.0, 1.5, 0.3, 0.9});
  HostTensor top_k = i64s({0, 40, 0, 3, 0, 1000});
  HostTensor top_p = HostTensor::from_doubles(DType::F32, {rows}, {0.9, 1.0, 1.0, 0.5, 1.0, 0.8});
  HostTensor min_p = HostTensor::from_doubles(DType::F32, {rows}, {0.0, 0.1, 0.0, 0.0, 0.3, 0.05});
  HostTensor ids = HostTensor::random(DType::I64, {rows, 9}, 8, -1, vocab - 1);  // -1 pads
  for (int64_t b = 0; b < rows; ++b) ids.data<int64_t>()[b * 9] = ids.data<int64_t>()[b * 9 + 1];  // repeats count twice
  // Penalise each row's most likely token so the penalties change what is drawn.
  for (int64_t b = 0; b < rows; ++b) {
    const float* row = logits.data<float>() + b * vocab;
    ids.data<int64_t>()[b * 9 + 8] = std::max_element(row, row + vocab) - row;
  }
  const std::vector<HostTensor> base = {logits, i64s({1, 2, 3, 4, 5, 6}), i64s({9, 9, 9, 9, 9, 9})};
  Attrs attrs = options(1.0, 0, 1.0, 0.0);
  attrs.set("repetition_penalty", 1.5), attrs.set("frequency_penalty", 0.4), attrs.set("presence_penalty", 0.25);
  std::vector<HostTensor> in = base;
  for (const HostTensor& t : {temperature, top_k, top_p, min_p}) {
    in.push_back(t);
    expect_kernel_matches(in, attrs, str(in.size() - 3, " per-row operands"));
  }
  in.push_back(ids);
  std::vector<int64_t> penalised = expect_kernel_matches(in, attrs, "with penalties");
  in.pop_back();
  EXPECT_NE(penalised, expect_kernel_matches(in, attrs, "without penalties")) << "the penalties change nothing";
}

// Many draws of one row (a step per draw) against the distribution computed here: the softmax of
// logit / temperature over the top-k tokens, cut to the shortest prefix holding top_p of their mass
// and to the tokens at least min_p times as likely as the first, renormalised.
std::vector<double> filtered_softmax(const std::vector<double>& logits, double temperature, int64_t top_k, double top_p,
                                     double min_p) {
  std::vector<int64_t> order(logits.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return logits[size_t(a)] > logits[size_t(b)]; });
  size_t keep = top_k > 0 ? std::min(size_t(top_k), order.size()) : order.size();
  while (keep > 0 && logits[size_t(order[keep - 1])] == -kInf) --keep;
  std::vector<double> p(logits.size(), 0.0);
  double total = 0;
  for (size_t j = 0; j < keep; ++j) total += p[size_t(order[j])] = std::exp((logits[size_t(order[j])] - logits[size_t(order[0])]) / temperature);
  double running = 0;
  size_t cut = keep;
  for (size_t j = 0; j < keep; ++j) {
    running += p[size_t(order[j])];
    if (running >= top_p * total) {
      cut = j + 1;
      break;
    }
  }
  for (size_t j = 0; j < keep; ++j)
    if (j >= cut || p[size_t(order[j])] < min_p) p[size_t(order[j])] = 0;
  const double kept = std::accumulate(p.begin(), p.end(), 0.0);
  for (double& x : p) x /= kept;
  return p;
}

double chi_square(const std::vector<int64_t>& counts, const std::vector<double>& p, int64_t draws) {
  double chi = 0;
  for (size_t t = 0; t < p.size(); ++t) {
    if (p[t] == 0) {
      if (counts[t] > 0) return kInf;  // a token outside the kept set was drawn
      continue;
    }
    const double expected = p[t] * double(draws);
    chi += (double(counts[t]) - expected) * (double(counts[t]) - expected) / expected;
  }
  return chi;
}

TEST(EagerSample, DrawsFollowTheFilteredSoftmax) {
  const std::vector<double> logits = {2.0, 1.5, -kInf, 1.0, 0.9, 0.5, 0.0, -0.5, -1.0, -2.0, 0.95};
  const int64_t vocab = int64_t(logits.size()), draws = 60000;
  struct Case { double temperature; int64_t top_k; double top_p, min_p; };
  // Chi-square thresholds: the 0.9999 quantile for up to 9 degrees of freedom is below 33.8.
  const double threshold = 33.8;
  for (const Case& c : std::vector<Case>{{1.0, 0, 1.0, 0.0}, {0.7, 6, 0.9, 0.0}, {1.3, 0, 0.8, 0.0}, {1.0, 0, 1.0, 0.3},
                                         {0.5, 4, 1.0, 0.0}}) {
    SCOPED_TRACE(str("T=", c.temperature, " k=", c.top_k, " p=", c.top_p, " min_p=", c.min_p));
    HostTensor x = HostTensor::empty(DType::F32, {draws, vocab});
    std::vector<int64_t> steps(static_cast<size_t>(draws));
    for (int64_t b = 0; b < draws; ++b) {
      for (int64_t t = 0; t < vocab; ++t) x.data<float>()[b * vocab + t] = float(logits[size_t(t)]);
      steps[size_t(b)] = b;
    }
    std::vector<HostTensor> got =
        eager::run_op(Op::Sample, options(c.temperature, c.top_k, c.top_p, c.min_p), {x, i64s(std::vector<int64_t>(size_t(draws), 2024)), i64s(steps)});
    std::vector<int64_t> counts(size_t(vocab), 0);
    for (int64_t t : tokens_of(got[0])) ++counts[size_t(t)];
    const double chi = chi_square(counts, filtered_softmax(logits, c.temperature, c.top_k, c.top_p, c.min_p), draws);
    EXPECT_LT(chi, threshold);
    if (c.top_k > 0 || c.top_p < 1 || c.min_p > 0) {  // the test can tell the filtered distribution from the plain one
      EXPECT_GT(chi_square(counts, filtered_softmax(logits, c.temperature, 0, 1.0, 0.0), draws), threshold);
    }
  }
}

TEST(EagerSample, EdgeCases) {
  HostTensor x = HostTensor::from_doubles(DType::F32, {3, 6}, {0.5, 3.0, 3.0, -1.0, 2.9, 0.0,    // a tie at the top
                                                               -kInf, -kInf, 4.0, -kInf, -kInf, -kInf,  // one finite
                                                               1.0, 1.0, 1.0, 1.0, 1.0, 1.0});  // flat
  const std::vector<HostTensor> in = {x, i64s({7, 8, 9}), i64s({0, 0, 0})};
  EXPECT_EQ(tokens_of(eager::run_op(Op::Sample, options(0.0, 0, 1.0, 0.0), in)[0]), (std::vector<int64_t>{1, 2, 0}))
      << "greedy takes the lower token of a tie";
  EXPECT_EQ(tokens_of(eager::run_op(Op::Sample, options(1.0, 0, 1e-9, 0.0), in)[0]), (std::vector<int64_t>{1, 2, 0}))
      << "a tiny top_p keeps the first token in order";
  EXPECT_EQ(tokens_of(eager::run_op(Op::Sample, options(1.0, 1, 1.0, 0.0), in)[0]), (std::vector<int64_t>{1, 2, 0}));
  // min_p = 1 keeps the tokens as likely as the first: both of the tie, any of the flat row.
  for (int64_t step = 0; step < 20; ++step) {
    std::vector<int64_t> t = tokens_of(eager::run_op(Op::Sample, options(1.0, 0, 1.0, 1.0), {x, i64s({7, 8, 9}), i64s({step, step, step})})[0]);
    EXPECT_TRUE(t[0] == 1 || t[0] == 2);
    EXPECT_EQ(t[1], 2);
  }
  expect_kernel_matches(in, options(0.8, 0, 0.95, 0.0), "ties and masks");
}

TEST(EagerSample, ARowDrawsTheSameTokenInAnyBatch) {
  const int64_t vocab = 32000;
  HostTensor batch = HostTensor::random(DType::F32, {4, vocab}, 17, -5, 5);
  const std::vector<int64_t> seeds = {100, 200, 300, 400}, steps = {5, 6, 7, 8};
  std::vector<int64_t> together = tokens_of(eager::run_op(Op::Sample, options(0.8, 0, 0.95, 0.0), {batch, i64s(seeds), i64s(steps)})[0]);
  for (int64_t b = 0; b < 4; ++b) {
    HostTensor one = HostTensor::empty(DType::F32, {1, vocab});
    std::copy(batch.data<float>() + b * vocab, batch.data<float>() + (b + 1) * vocab, one.data<float>());
    EXPECT_EQ(tokens_of(eager::run_op(Op::Sample, options(0.8, 0, 0.95, 0.0), {one, i64s({seeds[size_t(b)]}), i64s({steps[size_t(b)]})})[0])[0],
              together[size_t(b)]);
  }
}

// One long row without a filter is drawn over the threads in segments; the merge must give the
// one-pass token (a tie between segments goes to the lower token).
TEST(EagerSample, OneLongRowSplitOverThreads) {
  const int before = eager::num_threads();
  for (int threads : {2, 3}) {
    eager::set_num_threads(threads);
    HostTensor x = HostTensor::random(DType::F32, {1, 100003}, 23, -3, 3);
    for (int64_t step = 0; step < 6; ++step)
      expect_kernel_matches({x, i64s({99}), i64s({step})}, options(1.0, 0, 1.0, 0.0), str(threads, " threads, step ", step));
    HostTensor flat = HostTensor::empty(DType::F32, {1, 70001});
    for (int64_t t = 0; t < flat.numel(); ++t) flat.data<float>()[t] = t == 3 || t == 60000 ? 40.0f : 0.0f;
    expect_kernel_matches({flat, i64s({5}), i64s({1})}, options(1.0, 0, 1.0, 0.0), "two far-apart peaks");
  }
  eager::set_num_threads(before);
}

TEST(EagerSample, BadLogitsAndSettingsAreClearErrors) {
  auto error_of = [](std::vector<HostTensor> in, const Attrs& attrs) -> std::string {
    try {
      eager::run_op(Op::Sample, attrs, in);
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  };
  HostTensor x = HostTensor::random(DType::F32, {2, 10}, 3);
  x.data<float>()[13] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_NE(error_of({x, i64s({1, 2}), i64s({0, 0})}, options(1, 0, 1, 0)).find("row 1, token 3: the logit is nan"), std::string::npos);
  HostTensor masked = HostTensor::from_doubles(DType::F32, {1, 3}, {-kInf, -kInf, -kInf});
  EXPECT_NE(error_of({masked, i64s({1}), i64s({0})}, options(0.9, 0, 1, 0)).find("row 0 has no finite logit"), std::string::npos);
  HostTensor ok = HostTensor::random(DType::F32, {2, 10}, 4);
  HostTensor bad_p = HostTensor::from_doubles(DType::F32, {2}, {0.5, 0.0});
  std::vector<HostTensor> in = {ok, i64s({1, 2}), i64s({0, 0}), HostTensor::from_doubles(DType::F32, {2}, {1, 1}), i64s({0, 0}), bad_p};
  EXPECT_NE(error_of(in, options(1, 0, 1, 0)).find("row 1: top_p must be in (0, 1]"), std::string::npos);
  in = {ok, i64s({1, 2}), i64s({0, 0}), HostTensor::from_doubles(DType::F32, {2}, {1, 1}), i64s({0, 0}),
        HostTensor::from_doubles(DType::F32, {2}, {1, 1}), HostTensor::from_doubles(DType::F32, {2}, {0, 0}), i64s({3, 10})};
  in.back() = HostTensor::empty(DType::I64, {2, 1});
  in.back().data<int64_t>()[0] = 3, in.back().data<int64_t>()[1] = 10;
  EXPECT_NE(error_of(in, options(1, 0, 1, 0)).find("row 1: penalty_ids[0] = 10 is not below the vocabulary size 10"), std::string::npos);
}

}  // namespace
}  // namespace kiln::testing

#include "lib/audit/accumulate.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "kernels/common/sr_bits.h"
#include "lib/util/format.h"

namespace srkit::audit {
namespace {

// Step indices at which trajectories are sampled: 0 .. steps, evenly.
std::vector<uint64_t> trace_steps(uint64_t steps, int points) {
  std::vector<uint64_t> out;
  if (points <= 0) return out;
  const uint64_t n = std::min<uint64_t>(uint64_t(points), steps + 1);
  for (uint64_t k = 0; k < n; ++k) out.push_back(n == 1 ? steps : k * steps / (n - 1));
  return out;
}

// One deterministic or stochastic run; `round` maps an fp32 sum to the stored
// value. Records the first stall (a sum that rounded back to x) and the trace.
template <class Round>
double accumulate(float x, float delta, uint64_t steps, Round round, const AccumulateResult& r,
                  MethodResult* m, bool record) {
  size_t next_trace = 0;
  auto trace = [&](uint64_t t, float v) {
    if (!record) return;
    while (next_trace < r.trace_steps.size() && r.trace_steps[next_trace] == t) {
      m->trace.push_back((double(v) - (r.x0 + double(t) * r.delta)) / r.ulp0);
      ++next_trace;
    }
  };
  trace(0, x);
  for (uint64_t t = 1; t <= steps; ++t) {
    const float next = round(x + delta, t);
    if (next == x && m->stall_step < 0) {
      m->stall_step = int64_t(t);
      m->stall_value = x;
    }
    x = next;
    trace(t, x);
  }
  return x;
}

void set_error(MethodResult* m, double final_value, const AccumulateResult& r) {
  m->final_value = final_value;
  m->rel_error = (final_value - r.exact) / r.exact;
  m->rms_error_ulps = std::fabs(final_value - r.exact) / r.ulp0;
}

MethodResult named(AccumMethod m) {
  MethodResult r;
  r.method = m;
  return r;
}

std::string fmt(double v) { return strprintf("%.4g", v); }

}  // namespace

const char* accum_method_name(AccumMethod m) {
  switch (m) {
    case AccumMethod::kFp32:
      return "fp32";
    case AccumMethod::kRN:
      return "RN";
    case AccumMethod::kSR:
      return "SR";
    default:
      return "Kahan";
  }
}

std::vector<FpFormat> parse_format_list(const std::string& text, const std::string& flag) {
  if (text == "all") return {FpFormat::kBf16, FpFormat::kFp16, FpFormat::kE4M3, FpFormat::kE5M2};
  std::vector<FpFormat> out;
  size_t begin = 0;
  while (true) {
    const size_t end = text.find(',', begin);
    const std::string name = text.substr(begin, end == std::string::npos ? end : end - begin);
    FpFormat f;
    if (!parse_fp_format(name.c_str(), &f)) {
      throw std::invalid_argument(flag + ": unknown format '" + name +
                                  "' (expected bf16, fp16, e4m3, e5m2 or all, comma-separated)");
    }
    out.push_back(f);
    if (end == std::string::npos) return out;
    begin = end + 1;
  }
}

void validate(const AccumulateConfig& c) {
  if (c.steps == 0) throw std::invalid_argument("-n/--steps: must be at least 1");
  if (c.repeats == 0) throw std::invalid_argument("--repeats: must be at least 1");
  if (!(c.trace_points >= 0)) throw std::invalid_argument("trace points: must be >= 0");
  const double max = fp_format_max(c.format);
  const char* name = fp_format_name(c.format);
  if (!std::isfinite(c.x0) || std::fabs(c.x0) > max) {
    throw std::invalid_argument(
        strprintf("--x0: %g is outside %s's finite range (|x| <= %g)", c.x0, name, max));
  }
  const float delta = float(c.delta);
  if (!std::isfinite(delta) || delta == 0.0f) {
    throw std::invalid_argument(
        strprintf("--delta/--ratio: the step %g must be a finite nonzero fp32 value", c.delta));
  }
  const double end = c.x0 + double(c.steps) * double(delta);
  if (std::fabs(end) > max) {
    throw std::invalid_argument(
        strprintf("-n/--steps, --delta: x0 + n*delta = %g leaves %s's finite range (|x| <= %g)",
                  end, name, max));
  }
  if (end == 0.0)
    throw std::invalid_argument("--x0, --delta: the exact sum is 0 (no relative error)");
}

AccumulateResult run_accumulate(const AccumulateConfig& c) {
  validate(c);
  AccumulateResult r;
  r.config = c;
  const FpFormat f = c.format;
  const float x0 = fp_round(f, RoundMode::kRN, float(c.x0), 0);
  const float delta = float(c.delta);
  r.x0 = x0;
  r.delta = delta;
  r.exact = r.x0 + double(c.steps) * r.delta;  // exact: 24-bit delta times n < 2^29
  r.ulp0 = fp_format_ulp(f, x0);
  r.trace_steps = trace_steps(c.steps, c.trace_points);
  const bool record = !r.trace_steps.empty();

  MethodResult fp32 = named(AccumMethod::kFp32);
  set_error(&fp32,
            accumulate(
                x0, delta, c.steps, [](float s, uint64_t) { return s; }, r, &fp32, record),
            r);

  MethodResult rn = named(AccumMethod::kRN);
  auto round_rn = [f](float s, uint64_t) { return fp_round(f, RoundMode::kRN, s, 0); };
  set_error(&rn, accumulate(x0, delta, c.steps, round_rn, r, &rn, record), r);

  // SR: the mean final value and the spread of the relative error over repeats;
  // the stall step is meaningless for a random walk and stays -1.
  MethodResult sr = named(AccumMethod::kSR);
  double sum = 0, sum_sq = 0, sum_err_sq = 0;
  for (uint32_t rep = 0; rep < c.repeats; ++rep) {
    MethodResult one = named(AccumMethod::kSR);
    auto round_sr = [&](float s, uint64_t t) {
      return fp_round(f, RoundMode::kSR, s, sr_bits16(c.seed, kAccumulatePurpose, t, rep));
    };
    const double v = accumulate(x0, delta, c.steps, round_sr, r, &one, record && rep == 0);
    if (rep == 0) sr.trace = one.trace;
    const double e = (v - r.exact) / r.exact;
    sum += e;
    sum_sq += e * e;
    sum_err_sq += (v - r.exact) * (v - r.exact);
  }
  const double n = c.repeats;
  sr.rel_error = sum / n;
  sr.final_value = r.exact * (1 + sr.rel_error);
  sr.rel_error_std = n > 1 ? std::sqrt(std::max(0.0, (sum_sq - sum * sum / n) / (n - 1))) : 0;
  sr.rms_error_ulps = std::sqrt(sum_err_sq / n) / r.ulp0;

  // Kahan: the compensation c carries what the rounded sum lost; both live in
  // the format (bf16-kahan's layout), all arithmetic in fp32.
  MethodResult kahan = named(AccumMethod::kKahan);
  float comp = 0.0f;
  {
    float x = x0;
    size_t next_trace = 0;
    auto trace = [&](uint64_t t) {
      while (record && next_trace < r.trace_steps.size() && r.trace_steps[next_trace] == t) {
        kahan.trace.push_back((double(x) - (r.x0 + double(t) * r.delta)) / r.ulp0);
        ++next_trace;
      }
    };
    trace(0);
    for (uint64_t t = 1; t <= c.steps; ++t) {
      const float y = delta - comp;
      const float sum_t = fp_round(f, RoundMode::kRN, x + y, 0);
      const float next_comp = fp_round(f, RoundMode::kRN, (sum_t - x) - y, 0);
      if (sum_t == x && next_comp == comp && kahan.stall_step < 0) {
        // (x, comp) is a fixed point: no later step can change it.
        kahan.stall_step = int64_t(t);
        kahan.stall_value = x;
      }
      x = sum_t;
      comp = next_comp;
      trace(t);
    }
    set_error(&kahan, x, r);
  }
  r.methods = {fp32, rn, sr, kahan};
  return r;
}

std::vector<double> sweep_ratios(double ratio_min, double ratio_max, int points_per_decade) {
  if (!(ratio_min > 0) || !(ratio_max > 0) || !std::isfinite(ratio_max)) {
    throw std::invalid_argument("--ratio-min/--ratio-max: must be positive and finite");
  }
  if (!(ratio_min < ratio_max)) {
    throw std::invalid_argument(strprintf(
        "--ratio-min/--ratio-max: empty range [%g, %g] (need min < max)", ratio_min, ratio_max));
  }
  if (points_per_decade < 1) throw std::invalid_argument("--per-decade: must be at least 1");
  const double decades = std::log10(ratio_max / ratio_min);
  const int n = std::max(1, int(std::ceil(decades * points_per_decade - 1e-9)));
  std::vector<double> out;
  for (int k = 0; k <= n; ++k) out.push_back(ratio_min * std::pow(10.0, decades * k / n));
  return out;
}

std::string markdown_table(const std::vector<AccumulateResult>& runs) {
  std::string out =
      "| format | method | x0 | delta | delta/ulp | steps | final | exact | rel error | rel error "
      "std | error/ulp(x0) | stalls at step | stall value |\n"
      "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n";
  for (const AccumulateResult& r : runs) {
    for (const MethodResult& m : r.methods) {
      out += strprintf("| %s | %s | %s | %s | %s | %llu | %s | %s | %s | %s | %s | %s | %s |\n",
                       fp_format_name(r.config.format), accum_method_name(m.method),
                       fmt(r.x0).c_str(), fmt(r.delta).c_str(), fmt(r.delta / r.ulp0).c_str(),
                       static_cast<unsigned long long>(r.config.steps), fmt(m.final_value).c_str(),
                       fmt(r.exact).c_str(), fmt(m.rel_error).c_str(), fmt(m.rel_error_std).c_str(),
                       fmt(m.rms_error_ulps).c_str(),
                       m.stall_step < 0 ? "-" : std::to_string(m.stall_step).c_str(),
                       m.stall_step < 0 ? "-" : fmt(m.stall_value).c_str());
    }
  }
  return out;
}

std::string sweep_markdown_table(const std::vector<AccumulateResult>& runs) {
  std::string out =
      "| format | delta/ulp | fp32 rel error | RN rel error | SR rel error | SR std | Kahan rel "
      "error | RN stalls at step |\n"
      "|---|---:|---:|---:|---:|---:|---:|---:|\n";
  for (const AccumulateResult& r : runs) {
    const auto& m = r.methods;
    out += strprintf("| %s | %s | %s | %s | %s | %s | %s | %s |\n", fp_format_name(r.config.format),
                     fmt(r.delta / r.ulp0).c_str(), fmt(m[0].rel_error).c_str(),
                     fmt(m[1].rel_error).c_str(), fmt(m[2].rel_error).c_str(),
                     fmt(m[2].rel_error_std).c_str(), fmt(m[3].rel_error).c_str(),
                     m[1].stall_step < 0 ? "-" : std::to_string(m[1].stall_step).c_str());
  }
  return out;
}

}  // namespace srkit::audit

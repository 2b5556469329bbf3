// Input distributions for the rounding audits. Sample i is a pure function of
// (seed, i): drawn from Philox under a purpose no kernel uses, so audits are
// reproducible, need no buffers of N values, and do not depend on threads.
#pragma once

#include <cstdint>
#include <string>

namespace srkit::audit {

enum class Dist { kUniform, kNormal, kLogUniform };

// Parses "uniform" | "normal" | "loguniform"; throws std::invalid_argument.
Dist parse_dist(const std::string& name);
const char* dist_name(Dist d);

struct DistParams {
  Dist dist = Dist::kUniform;
  double a = 0.0, b = 1.0;         // uniform on [a, b)
  double mu = 0.0, sigma = 1.0;    // normal
  double emin = -8.0, emax = 8.0;  // loguniform: |x| = 2^u, u uniform on [emin, emax)
};

// Throws std::invalid_argument naming the flag (--a/--b, --sigma, --emin/--emax)
// when the parameters are unusable or could leave the finite float range.
void validate(const DistParams& p);

// "uniform(a=0, b=1)" and the like, for report headers.
std::string describe(const DistParams& p);

// Philox purpose of the audit input stream (the contract's purposes are small
// numbers; this one is reserved for audit data).
constexpr uint32_t kAuditDataPurpose = 0xffff;

// Sample i of the distribution, as a float (the value the cast sees).
float sample(const DistParams& p, uint64_t seed, uint64_t index);

}  // namespace srkit::audit

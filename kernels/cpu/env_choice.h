// A run-time choice between two code paths of one kernel family: a baseline
// that every x86-64-v3 CPU runs and an extended one that needs an
// instruction-set extension. Read once per process from an environment
// variable (`auto` or unset: the extended path where the CPU has it; or either
// path's name), overridable while a scope lives (tests and benchmarks compare
// the paths). kernels/cpu/cpu_isa.h (SRKIT_CPU_ISA) and
// kernels/cpu/gemm_bf16_path.h (SRKIT_BF16_GEMM) are its two uses.
#pragma once

#include <cstdlib>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace srkit::cpu {

// E: an enum whose two values are the baseline (0) and the extended path (1).
template <typename E>
struct EnvChoice {
  struct Rule {
    const char* variable;       // "SRKIT_CPU_ISA"
    const char* baseline_name;  // "avx2"
    const char* extended_name;  // "avx512"
    const char* kind;           // "an instruction set", in "'x' is not <kind>"
    const char* lacking;        // "this CPU lacks AVX-512 F/BW/VL/DQ"
    bool (*cpu_has_extended)();
  };

  static constexpr E kBaseline = static_cast<E>(0), kExtended = static_cast<E>(1);

  // The path `value` selects (null: unset) on a CPU that has or lacks the
  // extension. Throws std::invalid_argument with a one-line message naming the
  // variable for an unknown value or the extended path on a CPU without it.
  static E parse(const Rule& r, const char* value, bool has_extended) {
    const std::string v = value ? value : "";
    if (v.empty() || v == "auto") return has_extended ? kExtended : kBaseline;
    if (v == r.baseline_name) return kBaseline;
    if (v == r.extended_name) {
      if (!has_extended) {
        throw std::invalid_argument(std::string(r.variable) + "=" + r.extended_name + ", but " +
                                    r.lacking + " (use auto or " + r.baseline_name + ")");
      }
      return kExtended;
    }
    throw std::invalid_argument(std::string(r.variable) + "='" + v + "' is not " + r.kind +
                                " (expected auto, " + r.baseline_name + " or " + r.extended_name +
                                ")");
  }

  // The scoped override if one is alive, else the environment's choice (read once).
  static E current(const Rule& r) {
    if (forced()) return *forced();
    static const E chosen = parse(r, std::getenv(r.variable), r.cpu_has_extended());
    return chosen;
  }

  static const char* name(const Rule& r, E e) {
    return e == kExtended ? r.extended_name : r.baseline_name;
  }

  // The paths this CPU runs, baseline first.
  static std::vector<E> runnable(const Rule& r) {
    std::vector<E> out{kBaseline};
    if (r.cpu_has_extended()) out.push_back(kExtended);
    return out;
  }

  // Forces a path while alive and restores the previous choice after. Throws
  // std::invalid_argument for the extended path on a CPU without it.
  class Scoped {
   public:
    Scoped(const Rule& r, E e) : saved_(forced()) {
      if (e == kExtended && !r.cpu_has_extended()) {
        throw std::invalid_argument(std::string("forcing ") + r.variable + "=" + r.extended_name +
                                    ": " + r.lacking);
      }
      forced() = e;
    }
    ~Scoped() { forced() = saved_; }
    Scoped(const Scoped&) = delete;
    Scoped& operator=(const Scoped&) = delete;

   private:
    std::optional<E> saved_;
  };

 private:
  static std::optional<E>& forced() {
    static std::optional<E> e;
    return e;
  }
};

}  // namespace srkit::cpu

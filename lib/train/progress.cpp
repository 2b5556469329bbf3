#include "lib/train/progress.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>

namespace srkit {
namespace {

std::string format_eta(double seconds) {
  char buf[32];
  const long s = long(seconds + 0.5);
  std::snprintf(buf, sizeof buf, "%ld:%02ld", s / 60, s % 60);
  return buf;
}

}  // namespace

Progress::Progress(bool enabled, std::string label, uint64_t total_steps)
    : enabled_(enabled),
      tty_(enabled && isatty(STDERR_FILENO) == 1),
      label_(std::move(label)),
      total_(total_steps),
      print_every_(std::max<uint64_t>(1, total_steps / 10)) {}

void Progress::step(uint64_t step, double loss, double lr, double tokens_per_s,
                    double eta_seconds) {
  if (!enabled_) return;
  const auto s = static_cast<unsigned long long>(step);
  const auto t = static_cast<unsigned long long>(total_);
  if (tty_) {
    std::fprintf(stderr, "\r[%s] step %llu/%llu  loss %.4f  lr %.2e  %.0f tok/s  ETA %s   ",
                 label_.c_str(), s, t, loss, lr, tokens_per_s, format_eta(eta_seconds).c_str());
    mid_line_ = step != total_;
    if (!mid_line_) std::fputc('\n', stderr);
  } else if (step % print_every_ == 0 || step == total_) {
    std::fprintf(stderr, "[%s] step %llu/%llu loss %.4f lr %.2e %.0f tok/s\n", label_.c_str(), s, t,
                 loss, lr, tokens_per_s);
  }
}

void Progress::note(const std::string& message) {
  if (!enabled_) return;
  end_line();
  std::fprintf(stderr, "[%s] %s\n", label_.c_str(), message.c_str());
}

void Progress::end_line() {
  if (mid_line_) std::fputc('\n', stderr);
  mid_line_ = false;
}

}  // namespace srkit

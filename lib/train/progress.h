// Progress lines of a training run on stderr (lead rank, unless --quiet): one
// line rewritten in place on a terminal, every tenth of the run otherwise.
#pragma once

#include <cstdint>
#include <string>

namespace srkit {

class Progress {
 public:
  Progress(bool enabled, std::string label, uint64_t total_steps);
  // After optimizer step `step`: loss, learning rate, the run's tokens/s so far
  // and the estimated time to go.
  void step(uint64_t step, double loss, double lr, double tokens_per_s, double eta_seconds);
  // A message on its own line (ends the in-place line first).
  void note(const std::string& message);
  // Ends the in-place line, so the caller can print a line of its own.
  void end_line();

 private:
  bool enabled_, tty_;
  std::string label_;
  uint64_t total_, print_every_;
  bool mid_line_ = false;
};

}  // namespace srkit

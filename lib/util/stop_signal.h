// SIGINT and SIGTERM ask a run to stop; the handler only records the signal.
// Every phase polls it: the training loop after each step (then checkpoints),
// and the phases outside it -- data loading, evaluation, sampling -- between
// chunks, batches and tokens, so a signal at any moment stops the run within
// a fraction of a second with exit code 128 + N (docs/reliability.md).
// Checkpoint writes are not cut short: they are what a stop preserves.
#pragma once

#include <stdexcept>
#include <string>

namespace srkit {

// Installs the SIGINT/SIGTERM handlers (and ignores SIGXFSZ, so a file-size
// limit is a write error naming the file, not a silent kill).
void install_stop_handlers();

// The signal seen, or 0.
int stop_signal();

// A phase cut short by a stop signal.
struct Interrupted : std::runtime_error {
  Interrupted(int signal, const std::string& what);
  int signal;
};

// Throws Interrupted("stopped by signal N while <doing>") if a signal arrived.
void throw_if_stopped(const char* doing);

}  // namespace srkit

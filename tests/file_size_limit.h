// A full disk, simulated for the duration of a scope: RLIMIT_FSIZE's soft limit
// makes writes past `bytes` fail with EFBIG (SIGXFSZ, which would kill the
// process, is ignored meanwhile). Only the soft limit changes, so it is restored
// even without privileges.
#pragma once

#include <sys/resource.h>

#include <csignal>
#include <stdexcept>

namespace srkit::testing_faults {

class ScopedFileSizeLimit {
 public:
  explicit ScopedFileSizeLimit(rlim_t bytes) {
    if (::getrlimit(RLIMIT_FSIZE, &saved_) != 0) throw std::runtime_error("getrlimit failed");
    struct sigaction ignore {};
    ignore.sa_handler = SIG_IGN;
    ::sigaction(SIGXFSZ, &ignore, &saved_handler_);
    rlimit limited = saved_;
    limited.rlim_cur = bytes;
    if (::setrlimit(RLIMIT_FSIZE, &limited) != 0) throw std::runtime_error("setrlimit failed");
  }
  ~ScopedFileSizeLimit() {
    ::setrlimit(RLIMIT_FSIZE, &saved_);
    ::sigaction(SIGXFSZ, &saved_handler_, nullptr);
  }
  ScopedFileSizeLimit(const ScopedFileSizeLimit&) = delete;
  ScopedFileSizeLimit& operator=(const ScopedFileSizeLimit&) = delete;

 private:
  rlimit saved_{};
  struct sigaction saved_handler_ {};
};

}  // namespace srkit::testing_faults

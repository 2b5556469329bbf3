#include "lib/util/stop_signal.h"

#include <atomic>
#include <csignal>

namespace srkit {
namespace {
std::atomic<int> g_stop_signal{0};
extern "C" void on_stop_signal(int sig) { g_stop_signal.store(sig); }
}  // namespace

void install_stop_handlers() {
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  struct sigaction ignore {};
  ignore.sa_handler = SIG_IGN;
  sigaction(SIGXFSZ, &ignore, nullptr);
}

int stop_signal() { return g_stop_signal.load(); }

Interrupted::Interrupted(int sig, const std::string& what)
    : std::runtime_error(what), signal(sig) {}

void throw_if_stopped(const char* doing) {
  const int sig = stop_signal();
  if (sig != 0) {
    throw Interrupted(sig, "stopped by signal " + std::to_string(sig) + " while " + doing);
  }
}

}  // namespace srkit

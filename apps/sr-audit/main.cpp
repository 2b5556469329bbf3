#include <CLI/CLI.hpp>
#include <cstdio>

int main(int argc, char** argv) {
  CLI::App app{"sr-audit: rounding-error statistics"};
  app.set_version_flag("--version", std::string("sr-audit ") + SRKIT_VERSION);
  CLI11_PARSE(app, argc, argv);
  return 0;
}

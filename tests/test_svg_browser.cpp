// Every chart kind renders in a real browser. When a headless Chromium is
// installed (chromium, chromium-headless-shell, ...; or SRKIT_CHROMIUM names
// one), each default chart (seven long names) is loaded twice: --dump-dom
// must give back the <svg> document with no parser error, and a screenshot
// of the chart's size must be a PNG of that size (read from its IHDR header)
// well above the size of the screenshot of a blank white SVG of the same size:
// lines, text and bars compress far worse than white. Skipped, with the
// reason, when no such browser is installed (it is no build dependency).
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include "tests/test_paths.h"
#include "tests/test_svg_support.h"

namespace srkit::svg_testing {
namespace {

namespace fs = std::filesystem;

std::string find_browser() {
  if (const char* env = std::getenv("SRKIT_CHROMIUM"); env && *env) return env;
  const char* path = std::getenv("PATH");
  if (!path) return "";
  for (const char* name : {"chromium", "chromium-headless-shell", "chromium-browser",
                           "headless_shell", "google-chrome"}) {
    std::stringstream dirs(path);
    std::string dir;
    while (std::getline(dirs, dir, ':')) {
      const fs::path candidate = fs::path(dir.empty() ? "." : dir) / name;
      if (::access(candidate.c_str(), X_OK) == 0) return candidate.string();
    }
  }
  return "";
}

struct Output {
  int code;
  std::string output;
};

Output run(const std::string& command) {
  FILE* pipe = popen(command.c_str(), "r");
  std::string out;
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof buf, pipe)) out.append(buf, n);
  const int status = pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status), out};
}

struct Png {
  bool valid = false;
  uint32_t width = 0, height = 0;
  uintmax_t bytes = 0;
};

// Signature and IHDR chunk: width and height big-endian at bytes 16 and 20.
Png read_png_header(const fs::path& file) {
  Png png;
  std::ifstream in(file, std::ios::binary);
  unsigned char h[24] = {};
  if (!in.read(reinterpret_cast<char*>(h), sizeof h)) return png;
  const unsigned char signature[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
  if (!std::equal(signature, signature + 8, h) || std::string(h + 12, h + 16) != "IHDR") return png;
  auto be32 = [&](int at) {
    return uint32_t(h[at]) << 24 | uint32_t(h[at + 1]) << 16 | uint32_t(h[at + 2]) << 8 | h[at + 3];
  };
  png.valid = true;
  png.width = be32(16);
  png.height = be32(20);
  png.bytes = fs::file_size(file);
  return png;
}

class Browser {
 public:
  Browser(std::string binary, fs::path dir) : binary_(std::move(binary)), dir_(std::move(dir)) {}

  // The command line for one page; its own profile folder, so that
  // concurrent test runs never share one. --no-sandbox: the sandbox cannot
  // start as root or in most containers, and the pages are our own files.
  std::string command(const std::string& what, const fs::path& svg, int w, int h) const {
    return "timeout 120 " + binary_ +
           " --headless --no-sandbox --disable-gpu --hide-scrollbars "
           "--force-device-scale-factor=1 --user-data-dir=" +
           (dir_ / "profile").string() + " --window-size=" + std::to_string(w) + "," +
           std::to_string(h) + " " + what + " file://" + fs::absolute(svg).string();
  }

  Output dump_dom(const fs::path& svg) const {
    return run(command("--dump-dom", svg, 800, 600) + " 2>/dev/null");
  }

  Png screenshot(const fs::path& svg, int w, int h, const fs::path& png, std::string* log) const {
    const Output r = run(command("--screenshot=" + png.string(), svg, w, h) + " 2>&1");
    *log = r.output;
    return r.code == 0 ? read_png_header(png) : Png{};
  }

  // The PNG size of a blank white page of w x h, once per size.
  uintmax_t blank_bytes(int w, int h) {
    const auto key = std::make_pair(w, h);
    if (const auto it = blank_.find(key); it != blank_.end()) return it->second;
    const std::string name = "blank-" + std::to_string(w) + "x" + std::to_string(h);
    const fs::path svg = dir_ / (name + ".svg");
    std::ofstream(svg) << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << w
                       << "\" height=\"" << h << "\"><rect x=\"0\" y=\"0\" width=\"" << w
                       << "\" height=\"" << h << "\" fill=\"white\"/></svg>\n";
    std::string log;
    const Png png = screenshot(svg, w, h, dir_ / (name + ".png"), &log);
    EXPECT_TRUE(png.valid) << log;
    return blank_[key] = png.bytes;
  }

 private:
  std::string binary_;
  fs::path dir_;
  std::map<std::pair<int, int>, uintmax_t> blank_;
};

TEST(SvgBrowser, EveryChartKindRendersInHeadlessChromium) {
  const std::string binary = find_browser();
  if (binary.empty()) {
    GTEST_SKIP() << "no headless Chromium on PATH (chromium, chromium-headless-shell, "
                    "chromium-browser, headless_shell, google-chrome; or set SRKIT_CHROMIUM): "
                    "install one (apt-get install chromium) to render the charts";
  }
  const fs::path dir = testing_paths::fresh_dir("svg_browser", "charts");
  Browser browser(binary, dir);
  int k = 0;
  for (const NamedChart& c : default_charts(seven_long_names())) {
    const fs::path svg = dir / ("chart-" + std::to_string(k++) + ".svg");
    std::ofstream(svg) << c.svg;
    const Geometry g = geometry(c.svg);
    const int w = int(g.width), h = int(g.height);

    const Output dom = browser.dump_dom(svg);
    EXPECT_EQ(dom.code, 0) << c.kind;
    EXPECT_EQ(dom.output.rfind("<svg", 0), 0u) << c.kind << ": " << dom.output.substr(0, 300);
    EXPECT_EQ(dom.output.find("parsererror"), std::string::npos) << c.kind;

    std::string log;
    const Png png = browser.screenshot(svg, w, h, fs::path(svg).replace_extension(".png"), &log);
    ASSERT_TRUE(png.valid) << c.kind << ": no PNG\n" << log;
    EXPECT_EQ(png.width, uint32_t(w)) << c.kind;
    EXPECT_EQ(png.height, uint32_t(h)) << c.kind;
    const uintmax_t blank = browser.blank_bytes(w, h);
    EXPECT_GT(png.bytes, 3 * blank) << c.kind << ": " << png.bytes << " bytes vs " << blank
                                    << " for a blank page of " << w << "x" << h;
  }
}

}  // namespace
}  // namespace srkit::svg_testing

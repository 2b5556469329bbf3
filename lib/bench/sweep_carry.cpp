#include "lib/bench/sweep_carry.h"

#include <sys/wait.h>

#include <cerrno>
#include <cinttypes>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <stdexcept>

#include "lib/bench/sweep_child.h"
#include "lib/train/trainer.h"
#include "lib/util/atomic_file.h"
#include "lib/util/build_info.h"
#include "lib/util/format.h"
#include "lib/util/stop_signal.h"

namespace srkit {
namespace {

namespace fs = std::filesystem;

std::string hex64(uint64_t x) { return strprintf("%016" PRIx64, x); }

// The device a run's log names: the GPU for cuda, the CPU model otherwise
// (the thread count, which the CPU backend's description includes, does not
// change the bits).
std::string device_of_log(const std::string& log_file, const std::string& device_kind) {
  std::ifstream in(log_file);
  std::string line;
  while (std::getline(in, line)) {
    const nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
    if (!j.is_object() || j.value("type", "") != "config") continue;
    if (device_kind == "cuda") return j.value("backend", std::string("CUDA"));
    const nlohmann::json host = j.at("provenance").value("host", nlohmann::json::object());
    return "CPU: " + host.value("cpu_model", std::string("unknown")) + " (" +
           host.value("cpu_isa", std::string("?")) + ")";
  }
  return "unknown";
}

// One probe: the grid's model, data and first learning rate and seed, one step.
TrainConfig probe_config(const SweepOptions& o, const PrecisionStrategy& s,
                         const std::string& dir) {
  SweepCell cell;
  cell.strategy = s;
  cell.lr = o.lrs.front();
  cell.seed = o.seeds.front();
  cell.dir = dir;
  TrainConfig c = cell_config(o, cell);
  c.steps = 1;
  c.tokens = 0;
  c.warmup = 0;
  c.eval_interval = 0;
  c.eval_batches = 1;
  return c;
}

int wait_for(pid_t pid) {
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return -1;
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

std::string relative_cell(const SweepOptions& o, const SweepCell& cell) {
  return fs::path(cell.dir).lexically_relative(fs::path(o.out_dir) / "cells").string();
}

}  // namespace

nlohmann::json probe_environment(const SweepOptions& o) {
  const nlohmann::json build = build_facts();
  nlohmann::json env = {{"device", ""},
                        {"build_type", build.at("build_type")},
                        {"git_commit", build.at("git_commit")},
                        {"probe", nlohmann::json::object()}};
  for (const PrecisionStrategy& s : o.strategies) {
    const std::string dir = (fs::path(o.out_dir) / "probe" / strategy_folder(s.name)).string();
    const TrainConfig c = probe_config(o, s, dir);
    const std::string result = dir + "/probe.json", output = dir + "/output.txt";
    std::error_code ec;
    fs::remove(result, ec);
    const pid_t pid = start_child(dir, output, [&] {
      const RunSummary r = Trainer(c).run();
      if (r.interrupted) return 130;
      const std::string text = nlohmann::json{{"checksum", hex64(r.weights_checksum)},
                                              {"device", device_of_log(r.log_file, c.device)}}
                                   .dump() +
                               "\n";
      write_file_atomic(result, text.data(), text.size());
      return 0;
    });
    const int code = wait_for(pid);
    if (code == 130) throw Interrupted(SIGINT, "stopped by a signal during the numerics probe");
    std::ifstream in(result);
    const nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
    if (code != 0 || !j.is_object()) {
      throw std::runtime_error("the numerics probe of " + s.name + " failed (exit " +
                               std::to_string(code) + "): " + last_line_of(output) + "; see " +
                               output);
    }
    env["probe"][s.name] = j.at("checksum");
    env["device"] = j.at("device");
  }
  return env;
}

void carry_cells(const SweepOptions& o, const std::vector<SweepCell>& cells,
                 const nlohmann::json& env, std::vector<SweepCellResult>& results,
                 std::vector<bool>& done, CarryReport& report) {
  for (size_t i = 0; i < cells.size(); ++i) {
    if (done[i]) continue;
    const SweepCell& cell = cells[i];
    const nlohmann::json want = portable_config(cell_config(o, cell).to_json());
    const std::string probe = env.at("probe").value(cell.strategy.name, std::string());
    for (const std::string& source : o.carry_from) {
      const fs::path file = fs::path(source) / "cells" / relative_cell(o, cell) / "result.json";
      std::error_code ec;
      if (!fs::exists(file, ec)) continue;
      std::ifstream in(file);
      const nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
      SweepCellResult r;
      try {
        if (!j.is_object()) throw std::runtime_error("not JSON");
        r = SweepCellResult::from_json(j);
      } catch (const std::exception& e) {
        report.excluded.push_back(file.string() + ": not a sweep cell result (" + e.what() + ")");
        continue;
      }
      const nlohmann::json& there = r.environment;
      std::string why;
      if (portable_config(r.config) != want) {
        why = "another configuration (" + portable_config(r.config).dump() + ")";
      } else if (!there.is_object() || !there.contains("probe")) {
        why = "no environment record (written by a sweep before carry-over existed)";
      } else if (there["probe"].value(cell.strategy.name, std::string()) != probe) {
        why = "other numerics: probe " +
              there["probe"].value(cell.strategy.name, std::string("none")) + " there (" +
              there.value("device", std::string("?")) + ", " +
              there.value("build_type", std::string("?")) + ", commit " +
              there.value("git_commit", std::string("?")) + "), " + probe + " here";
      }
      if (!why.empty()) {
        report.excluded.push_back(file.string() + ": " + why);
        continue;
      }
      CarriedCell from;
      from.source = source;
      from.device = there.value("device", std::string("?"));
      from.other_device =
          from.device != env.value("device", std::string()) ||
          there.value("build_type", std::string()) != env.value("build_type", std::string());
      r.carried_from = source;
      const std::string text = r.to_json().dump(1) + "\n";
      fs::create_directories(cell.dir);
      write_file_atomic(cell.result_file(), text.data(), text.size());
      results[i] = r;
      done[i] = true;
      report.carried.emplace_back(i, from);
      break;
    }
  }
}

std::string carry_markdown(const SweepOptions& o, const std::vector<SweepCell>& cells,
                           const CarryReport& report) {
  (void)o;
  std::string md = "\n## Where the cells ran\n\n";
  md += strprintf(
      "%zu cells: %d run by this call, %d done before in this folder, %zu carried "
      "from other folders.\n",
      cells.size(), report.run_here, report.done_before, report.carried.size());
  if (!report.carried.empty()) {
    md += "\n| cell | carried from | device |\n|---|---|---|\n";
    for (const auto& [index, from] : report.carried) {
      const SweepCell& c = cells[index];
      md += "| " + c.strategy.name + " lr=" + lr_text(c.lr) + " seed=" + std::to_string(c.seed) +
            " | " + from.source + " | " + from.device +
            (from.other_device ? " (another device or build; same numerics probe)" : "") + " |\n";
    }
  }
  if (!report.excluded.empty()) {
    md += "\nNot carried (run here instead):\n\n";
    for (const std::string& why : report.excluded) md += "- " + why + "\n";
  }
  return md;
}

nlohmann::json carry_json(const std::vector<SweepCell>& cells, const CarryReport& report) {
  nlohmann::json carried = nlohmann::json::array();
  for (const auto& [index, from] : report.carried) {
    const SweepCell& c = cells[index];
    carried.push_back({{"strategy", c.strategy.name},
                       {"lr", c.lr},
                       {"seed", c.seed},
                       {"from", from.source},
                       {"device", from.device},
                       {"other_device", from.other_device}});
  }
  return {{"run_here", report.run_here},
          {"done_before", report.done_before},
          {"carried", carried},
          {"excluded", report.excluded}};
}

}  // namespace srkit

// sr-bench sweep: the summary arithmetic on known cells, the ablation specs,
// and the command as a user runs it on the tiny preset (2 strategies x 2
// learning rates x 2 seeds, a few steps): every report written and parseable,
// a half-done sweep resumed by running only the missing cells, the same sweep
// twice giving the same numbers, a diverging cell reported as diverged, a
// folder of another sweep refused, and bad flags (one line, exit 2).
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "lib/bench/sweep_cell.h"
#include "lib/bench/sweep_grid.h"
#include "lib/bench/sweep_report.h"
#include "tests/run_command.h"
#include "tests/test_paths.h"

namespace srkit {
namespace {

namespace fs = std::filesystem;

struct Result {
  int code;
  std::string out, err;
};

Result run_shell(const std::string& cmd) {
  const srkit::testing_process::SplitResult r = srkit::testing_process::run_command_split(cmd);
  return {r.code, r.out, r.err};
}

Result sweep(const std::string& args) {
  return run_shell(std::string(SRKIT_BIN_DIR) + "/sr-bench sweep " + args);
}

std::string read_text(const fs::path& p) {
  std::ifstream f(p);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::stringstream ss(text);
  std::string line;
  while (std::getline(ss, line)) lines.push_back(line);
  return lines;
}

size_t count_of(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t p = text.find(what); p != std::string::npos; p = text.find(what, p + 1)) ++n;
  return n;
}

// Every cell's numbers (the CSV without its wall-time column).
std::string numbers_of(const fs::path& csv) {
  std::string out;
  for (const std::string& line : lines_of(read_text(csv)))
    out += line.substr(0, line.rfind(',')) + "\n";
  return out;
}

// Well-formed XML, checked by Python's parser when python3 is there.
void expect_well_formed_xml(const fs::path& file) {
  if (run_shell("python3 -c 'pass'").code != 0) {
    GTEST_LOG_(INFO) << "python3 absent: " << file << " not parsed";
    return;
  }
  const Result r =
      run_shell("python3 -c \"import sys, xml.etree.ElementTree as E; E.parse(sys.argv[1])\" " +
                file.string());
  EXPECT_EQ(r.code, 0) << file << ": " << r.err;
}

const std::string kTiny =
    "--model tiny --batch 2 --seq-len 16 --steps 4 --warmup 1 --eval-batches 1 "
    "--curve-points 2 --threads 2 --jobs 2";
const std::string kGrid = kTiny + " --strategies mixed,bf16-sr --lrs 1e-3,3e-3 --seeds 1,2";

// One sweep of the grid, shared by the tests that read it.
class SweepGrid : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new fs::path(testing_paths::fresh_dir("sweep", "grid"));
    first_ = new Result(sweep(kGrid + " --out " + dir_->string()));
  }
  static void TearDownTestSuite() {
    fs::remove_all(*dir_);
    delete dir_;
    delete first_;
  }
  static fs::path* dir_;
  static Result* first_;
};
fs::path* SweepGrid::dir_ = nullptr;
Result* SweepGrid::first_ = nullptr;

TEST_F(SweepGrid, WritesEveryReportAndTheyParse) {
  ASSERT_EQ(first_->code, 0) << first_->err;
  const fs::path& d = *dir_;
  // The table, printed and in sweep.md.
  const std::string md = read_text(d / "sweep.md");
  EXPECT_NE(first_->out.find(md), std::string::npos);
  EXPECT_NE(md.find("| strategy | lr 0.001 | lr 0.003 |"), std::string::npos) << md;
  // mixed: the loss table and the best-lr table; bf16-sr also the paired differences.
  EXPECT_EQ(count_of(md, "| mixed | "), 2u) << md;
  EXPECT_EQ(count_of(md, "| bf16-sr | "), 3u) << md;
  EXPECT_NE(md.find("## Paired differences from mixed"), std::string::npos) << md;
  EXPECT_NE(md.find(" ± "), std::string::npos);
  EXPECT_NE(first_->err.find("[8/8]"), std::string::npos) << first_->err;

  const std::vector<std::string> csv = lines_of(read_text(d / "sweep.csv"));
  ASSERT_EQ(csv.size(), 9u);
  EXPECT_EQ(csv[0].rfind("strategy,lr,seed,status,", 0), 0u);

  const nlohmann::json j = nlohmann::json::parse(read_text(d / "sweep.json"));
  ASSERT_EQ(j.at("cells").size(), 8u);
  ASSERT_EQ(j.at("points").size(), 4u);
  ASSERT_EQ(j.at("summary").size(), 2u);
  for (const nlohmann::json& c : j["cells"]) {
    EXPECT_EQ(c.at("status"), "ok");
    EXPECT_TRUE(std::isfinite(c.at("val_loss").get<double>()));
    EXPECT_EQ(c.at("steps_done"), 4);
    EXPECT_EQ(c.at("tokens"), 4 * 2 * 16);
    EXPECT_EQ(c.at("val_curve").size(), 2u);  // steps 2 and 4
  }
  for (const nlohmann::json& p : j["points"]) {
    EXPECT_EQ(p.at("seeds"), 2);
    EXPECT_GT(p.at("se_val_loss").get<double>(), 0.0);  // two seeds, two data orders
  }
  EXPECT_EQ(j["summary"][0].at("strategy"), "mixed");
  EXPECT_DOUBLE_EQ(j["summary"][0].at("vs_mixed").get<double>(), 1.0);
  EXPECT_TRUE(j["summary"][1].contains("vs_mixed"));

  // Charts: one series per strategy (error bars are part of each line).
  for (const char* chart : {"sweep-lr.svg", "sweep-curves.svg"}) {
    const std::string svg = read_text(d / chart);
    EXPECT_EQ(count_of(svg, "<polyline class=\"series\""), 2u) << chart;
    expect_well_formed_xml(d / chart);
  }
  // Each cell has its own folder with its log and result.
  const fs::path cell = d / "cells" / "bf16-sr" / "lr0.003" / "seed2";
  EXPECT_TRUE(fs::exists(cell / "result.json"));
  EXPECT_TRUE(fs::exists(cell / "log.jsonl"));
}

TEST_F(SweepGrid, ResumeRunsOnlyTheMissingCells) {
  ASSERT_EQ(first_->code, 0) << first_->err;
  const fs::path cells = *dir_ / "cells";
  const std::string before = numbers_of(*dir_ / "sweep.csv");
  const std::vector<fs::path> removed = {cells / "mixed" / "lr0.001" / "seed1" / "result.json",
                                         cells / "bf16-sr" / "lr0.003" / "seed2" / "result.json"};
  for (const fs::path& p : removed) ASSERT_TRUE(fs::remove(p)) << p;
  std::vector<std::pair<fs::path, fs::file_time_type>> kept;
  for (const auto& e : fs::recursive_directory_iterator(cells)) {
    if (e.path().filename() == "result.json") kept.emplace_back(e.path(), e.last_write_time());
  }
  ASSERT_EQ(kept.size(), 6u);

  const Result again = sweep(kGrid + " --out " + dir_->string());
  ASSERT_EQ(again.code, 0) << again.err;
  EXPECT_NE(again.out.find("2 cells run now, 6 before"), std::string::npos) << again.out;
  EXPECT_NE(again.err.find("6 done before"), std::string::npos) << again.err;
  for (const auto& [path, time] : kept) EXPECT_EQ(fs::last_write_time(path), time) << path;
  for (const fs::path& p : removed) EXPECT_TRUE(fs::exists(p)) << p;
  // Deterministic: the rerun cells reproduce their numbers.
  EXPECT_EQ(numbers_of(*dir_ / "sweep.csv"), before);
}

TEST_F(SweepGrid, SameSweepTwiceGivesTheSameNumbers) {
  ASSERT_EQ(first_->code, 0) << first_->err;
  const fs::path other = testing_paths::fresh_dir("sweep", "again");
  const Result r = sweep(kGrid + " --jobs 1 --out " + other.string());
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(numbers_of(other / "sweep.csv"), numbers_of(*dir_ / "sweep.csv"));
  fs::remove_all(other);
}

TEST_F(SweepGrid, RefusesAFolderOfAnotherSweep) {
  ASSERT_EQ(first_->code, 0) << first_->err;
  const Result r = sweep(kGrid + " --steps 5 --out " + dir_->string());
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("another configuration"), std::string::npos) << r.err;
}

TEST(SweepCli, DivergingCellIsReportedAsDiverged) {
  const fs::path d = testing_paths::fresh_dir("sweep", "diverge");
  const Result r =
      sweep(kTiny + " --strategies bf16 --lrs 1e-3,1e20 --seeds 1 --clip 0 --out " + d.string());
  ASSERT_EQ(r.code, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(read_text(d / "sweep.json"));
  ASSERT_EQ(j.at("cells").size(), 2u);
  EXPECT_EQ(j["cells"][0].at("status"), "ok");
  const nlohmann::json& bad = j["cells"][1];
  EXPECT_EQ(bad.at("status"), "diverged");
  EXPECT_GE(bad.at("diverged_step").get<uint64_t>(), 1u);
  EXPECT_LE(bad.at("diverged_step").get<uint64_t>(), 4u);
  EXPECT_FALSE(bad.contains("val_loss"));
  const std::string md = read_text(d / "sweep.md");
  EXPECT_NE(md.find("diverged (1/1, step "), std::string::npos) << md;
  EXPECT_NE(read_text(d / "sweep.csv").find(",diverged,"), std::string::npos);
  // The diverged cell counts as done: a rerun runs nothing.
  const Result again =
      sweep(kTiny + " --strategies bf16 --lrs 1e-3,1e20 --seeds 1 --clip 0 --out " + d.string());
  EXPECT_NE(again.out.find("0 cells run now, 2 before"), std::string::npos) << again.out;
  fs::remove_all(d);
}

// The holder's pid from a folder's lock file ("pid N (command) since T").
pid_t lock_holder(const fs::path& dir) {
  const std::string text = read_text(dir / ".srkit.lock");
  return text.rfind("pid ", 0) == 0 ? pid_t(std::stol(text.substr(4))) : -1;
}

// Gone, or a zombie nobody has reaped yet (it holds nothing any more).
bool process_ended(pid_t pid) {
  const std::string stat = read_text("/proc/" + std::to_string(pid) + "/stat");
  if (stat.empty()) return true;
  const size_t close = stat.rfind(')');
  return close != std::string::npos && close + 2 < stat.size() && stat[close + 2] == 'Z';
}

bool wait_until_ended(pid_t pid, double seconds) {
  for (int i = 0; i < int(seconds * 20); ++i) {
    if (process_ended(pid)) return true;
    ::usleep(50'000);
  }
  return process_ended(pid);
}

// A sweep owns its folder: a second sweep on it is refused at once with the
// holder named (exit 2, one line on stderr); and a sweep killed with SIGKILL
// takes its running cell with it (no orphan training on and holding the cell).
TEST(SweepCli, TheFolderHasOneSweepAndItsCellsDieWithIt) {
  const fs::path d = testing_paths::fresh_dir("sweep", "owned");
  const std::string grid = kTiny + " --strategies bf16-sr --lrs 1e-3 --seeds 1 --jobs 1 --out " +
                           d.string() + " --steps 1000000";
  const pid_t first =
      testing_process::spawn_command(std::string(SRKIT_BIN_DIR) + "/sr-bench sweep " + grid);
  const fs::path cell = d / "cells" / "bf16-sr" / "lr0.001" / "seed1";
  ASSERT_TRUE(testing_process::wait_for_text(cell / "log.jsonl", "\"type\":\"step\"", 60));

  const Result second = sweep(grid);
  EXPECT_EQ(second.code, 2) << second.err;
  EXPECT_EQ(lines_of(second.err).size(), 1u) << second.err;
  EXPECT_NE(second.err.find("--out " + d.string() + " is in use by another run (pid " +
                            std::to_string(first)),
            std::string::npos)
      << second.err;

  const pid_t cell_pid = lock_holder(cell);
  ASSERT_GT(cell_pid, 0) << read_text(cell / ".srkit.lock");
  ASSERT_NE(cell_pid, first);
  ::kill(first, SIGKILL);
  EXPECT_EQ(testing_process::wait_exit(first), 128 + SIGKILL);
  EXPECT_TRUE(wait_until_ended(cell_pid, 20)) << "the cell outlived its sweep";
  fs::remove_all(d);
}

// A cell result that does not parse (results are written atomically, so
// something else damaged it): exit 2 naming the file, nothing run.
TEST(SweepCli, ADamagedCellResultIsExit2NamingIt) {
  const fs::path d = testing_paths::fresh_dir("sweep", "damaged");
  const std::string grid =
      kTiny + " --strategies bf16-sr --lrs 1e-3 --seeds 1 --jobs 1 --out " + d.string();
  ASSERT_EQ(sweep(grid).code, 0);
  const fs::path result = d / "cells" / "bf16-sr" / "lr0.001" / "seed1" / "result.json";
  const std::string text = read_text(result);
  std::ofstream(result) << text.substr(0, text.size() / 2);
  const Result r = sweep(grid);
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_EQ(lines_of(r.err).size(), 1u) << r.err;
  EXPECT_NE(r.err.find(result.string() + ": not a sweep cell result"), std::string::npos) << r.err;
  fs::remove_all(d);
}

// A cell that fails says why on the sweep's own stderr, not only in its file.
TEST(SweepCli, AFailedCellsReasonIsOnTheSweepsStderr) {
  const fs::path d = testing_paths::fresh_dir("sweep", "failed");
  const std::string grid =
      kTiny + " --strategies bf16-sr --lrs 1e-3 --seeds 1 --jobs 1 --out " + d.string();
  // The cell's log is a folder: its training run cannot open it.
  const fs::path cell = d / "cells" / "bf16-sr" / "lr0.001" / "seed1";
  fs::create_directories(cell / "log.jsonl");
  const Result r = sweep(grid);
  EXPECT_EQ(r.code, 1) << r.err;
  EXPECT_NE(r.err.find("cell bf16-sr lr=0.001 seed=1 failed (exit 1): sr-bench sweep: --log " +
                       (cell / "log.jsonl").string()),
            std::string::npos)
      << r.err;
  fs::remove_all(d);
}

// ---- carried across machines (lib/bench/sweep_carry.h) ----------------------

const std::string kCarryGrid = kTiny + " --strategies mixed,bf16-sr --seeds 1";

nlohmann::json read_json(const fs::path& p) { return nlohmann::json::parse(read_text(p)); }

// A grid split over two "machines" (two folders): the second takes the first's
// cells and runs only the rest, and its report equals the whole grid run in one
// folder; a rerun there runs nothing.
TEST(SweepCarry, CellsFinishedInAnotherFolderCountAsDone) {
  const fs::path a = testing_paths::fresh_dir("sweep", "carry_a");
  const fs::path b = testing_paths::fresh_dir("sweep", "carry_b");
  const fs::path whole = testing_paths::fresh_dir("sweep", "carry_whole");
  ASSERT_EQ(sweep(kCarryGrid + " --lrs 1e-3 --out " + a.string()).code, 0);
  const Result r =
      sweep(kCarryGrid + " --lrs 1e-3,3e-3 --out " + b.string() + " --carry " + a.string());
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("2 cells run now, 0 before, 2 carried from other folders"),
            std::string::npos)
      << r.out;
  ASSERT_EQ(sweep(kCarryGrid + " --lrs 1e-3,3e-3 --out " + whole.string()).code, 0);
  EXPECT_EQ(numbers_of(b / "sweep.csv"), numbers_of(whole / "sweep.csv"));

  const fs::path carried = b / "cells" / "bf16-sr" / "lr0.001" / "seed1" / "result.json";
  EXPECT_EQ(read_json(carried).at("carried_from"), a.string());
  EXPECT_TRUE(read_json(carried).at("environment").at("probe").contains("bf16-sr"));
  const nlohmann::json provenance = read_json(b / "sweep.json").at("provenance");
  EXPECT_EQ(provenance.at("carried").size(), 2u);
  EXPECT_EQ(provenance.at("run_here"), 2);
  EXPECT_NE(read_text(b / "sweep.md").find("| mixed lr=0.001 seed=1 | " + a.string()),
            std::string::npos);

  const Result again =
      sweep(kCarryGrid + " --lrs 1e-3,3e-3 --out " + b.string() + " --carry " + a.string());
  EXPECT_NE(again.out.find("0 cells run now, 4 before"), std::string::npos) << again.out;
  for (const fs::path& d : {a, b, whole}) fs::remove_all(d);
}

// Cells of other numerics (a probe that differs), another configuration, or
// no environment record are listed with the reason and run here instead.
TEST(SweepCarry, CellsOfOtherSettingsAreReportedAndRunHere) {
  const std::string grid = kTiny + " --strategies bf16-sr --lrs 1e-3 --seeds 1";
  const fs::path a = testing_paths::fresh_dir("sweep", "other_a");
  ASSERT_EQ(sweep(grid + " --out " + a.string()).code, 0);
  const fs::path result = fs::path("cells") / "bf16-sr" / "lr0.001" / "seed1" / "result.json";
  auto variant = [&](const std::string& name, const std::function<void(nlohmann::json&)>& edit) {
    const fs::path d = testing_paths::fresh_dir("sweep", "other_" + name);
    fs::create_directories((d / result).parent_path());
    nlohmann::json j = read_json(a / result);
    edit(j);
    std::ofstream(d / result) << j.dump(1);
    return d;
  };
  const fs::path numerics = variant("numerics", [](nlohmann::json& j) {
    j["environment"]["probe"]["bf16-sr"] = "0123456789abcdef";
  });
  const fs::path config = variant("config", [](nlohmann::json& j) { j["config"]["steps"] = 5; });
  const fs::path old = variant("old", [](nlohmann::json& j) { j.erase("environment"); });

  const fs::path b = testing_paths::fresh_dir("sweep", "other_b");
  const Result r = sweep(grid + " --out " + b.string() + " --carry " + numerics.string() + "," +
                         config.string() + "," + old.string());
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("1 cells run now, 0 before, 0 carried"), std::string::npos) << r.out;
  const std::string md = read_text(b / "sweep.md");
  for (const std::string& why :
       {(numerics / result).string() + ": other numerics: probe 0123456789abcdef there",
        (config / result).string() + ": another configuration",
        (old / result).string() + ": no environment record"}) {
    EXPECT_NE(md.find(why), std::string::npos) << why << "\n" << md;
    EXPECT_NE(r.err.find("not carried: " + why), std::string::npos) << why << "\n" << r.err;
  }
  // The cell run here reproduces the one of the first folder.
  EXPECT_EQ(numbers_of(b / "sweep.csv"), numbers_of(a / "sweep.csv"));
  const Result bad = sweep(grid + " --out " + b.string() + " --carry " + (b / "nope").string());
  EXPECT_EQ(bad.code, 2) << bad.err;
  EXPECT_NE(bad.err.find("--carry " + (b / "nope").string()), std::string::npos) << bad.err;
  for (const fs::path& d : {a, b, numerics, config, old}) fs::remove_all(d);
}

// The report of cells done elsewhere is rebuilt from a folder holding copies
// of them, with the data at another path (compared by name), training nothing:
// the way a grid finished on GPUs is reported on a machine without one.
TEST(SweepCarry, AReportIsRebuiltFromCopiedCellsWithoutTraining) {
  const fs::path a = testing_paths::fresh_dir("sweep", "rebuild_a");
  const fs::path b = testing_paths::fresh_dir("sweep", "rebuild_b");
  std::string text;
  for (int i = 0; i < 400; ++i) text += "line " + std::to_string(i) + " of some training text\n";
  for (const fs::path& d : {a, b}) std::ofstream(d / "text.txt") << text;
  const std::string grid = kTiny + " --strategies bf16-sr --lrs 1e-3 --seeds 1,2 --data ";
  ASSERT_EQ(sweep(grid + (a / "text.txt").string() + " --out " + (a / "run").string()).code, 0);
  fs::create_directories(b / "run");
  fs::copy(a / "run" / "cells", b / "run" / "cells", fs::copy_options::recursive);
  const Result r = sweep(grid + (b / "text.txt").string() + " --out " + (b / "run").string());
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("0 cells run now, 2 before"), std::string::npos) << r.out;
  EXPECT_FALSE(fs::exists(b / "run" / "probe")) << "nothing to run: no probe either";
  EXPECT_EQ(numbers_of(b / "run" / "sweep.csv"), numbers_of(a / "run" / "sweep.csv"));
  for (const fs::path& d : {a, b}) fs::remove_all(d);
}

TEST(SweepCli, BadFlagsAreOneLineAndExit2) {
  const fs::path d = testing_paths::fresh_dir("sweep", "bad");
  const std::string out = " --out " + d.string();
  for (const std::string& args :
       {kTiny + " --lrs 0" + out, kTiny + " --lrs 1e-3,abc" + out, kTiny + " --seeds 1,-2" + out,
        kTiny + " --seeds 1,1" + out, kTiny + " --jobs 0" + out,
        kTiny + " --ablate bf16-sr:v=f32" + out, kTiny + " --strategies bf16:foo=1" + out,
        kTiny + " --steps 0" + out, kTiny + " --data " + (d / "missing.txt").string() + out,
        kTiny}) {
    const Result r = sweep(args);
    EXPECT_EQ(r.code, 2) << args << "\n" << r.err;
    EXPECT_EQ(lines_of(r.err).size(), 1u) << args << "\n" << r.err;
  }
  EXPECT_FALSE(fs::exists(d / "cells"));
  fs::remove_all(d);
}

// ---- the library, on known values ----------------------------------------

SweepCellResult cell(const std::string& strategy, double lr, uint64_t seed, double loss) {
  SweepCellResult c;
  c.strategy = strategy;
  c.lr = lr;
  c.seed = seed;
  c.val_loss = loss;
  if (!std::isfinite(loss)) {
    c.status = "diverged";
    c.diverged_step = 7 + seed;
  }
  return c;
}

TEST(SweepReport, MeansStandardErrorsBestRatesAndRatios) {
  SweepOptions o;
  o.strategies = {strategy_from_string("mixed"), strategy_from_string("bf16-sr")};
  o.lrs = {1e-3, 2e-3, 4e-3};
  o.seeds = {1, 2};
  const double nan = NAN;
  const std::vector<SweepCellResult> cells = {
      cell("mixed", 1e-3, 1, 3.0),    cell("mixed", 1e-3, 2, 3.2),    // 3.1 +- 0.1
      cell("mixed", 2e-3, 1, 2.9),    cell("mixed", 2e-3, 2, 2.9),    // 2.9 (best)
      cell("mixed", 4e-3, 1, 2.0),    cell("mixed", 4e-3, 2, nan),    // one seed diverged
      cell("bf16-sr", 1e-3, 1, 3.0),  cell("bf16-sr", 1e-3, 2, 3.0),  // 3.0
      cell("bf16-sr", 2e-3, 1, 2.8),  cell("bf16-sr", 2e-3, 2, 2.8),  // 2.8 (best)
      cell("bf16-sr", 4e-3, 1, 2.82), cell("bf16-sr", 4e-3, 2, 2.8),  // 2.81: within 1%
  };
  const SweepTable t = summarize_sweep(o, cells);
  ASSERT_EQ(t.points.size(), 6u);
  EXPECT_NEAR(t.at(0, 0).mean, 3.1, 1e-12);
  EXPECT_NEAR(t.at(0, 0).se, 0.1, 1e-12);  // sd 0.1414 / sqrt(2)
  EXPECT_EQ(t.at(0, 2).diverged, 1);
  EXPECT_EQ(t.at(0, 2).first_diverged_step, 9u);
  EXPECT_FALSE(t.at(0, 2).complete());
  EXPECT_NEAR(t.at(0, 2).mean, 2.0, 1e-12);  // the seed that finished, not the best
  ASSERT_EQ(t.summaries.size(), 2u);
  EXPECT_DOUBLE_EQ(t.summaries[0].best_lr, 2e-3);
  EXPECT_NEAR(t.summaries[0].best_loss, 2.9, 1e-12);
  EXPECT_DOUBLE_EQ(t.summaries[0].largest_lr_within_1pct, 2e-3);
  EXPECT_DOUBLE_EQ(t.summaries[0].vs_mixed, 1.0);
  EXPECT_DOUBLE_EQ(t.summaries[1].best_lr, 2e-3);
  EXPECT_DOUBLE_EQ(t.summaries[1].largest_lr_within_1pct, 4e-3);
  EXPECT_NEAR(t.summaries[1].vs_mixed, 2.8 / 2.9, 1e-12);

  const std::string md = sweep_markdown(o, t, "", {});
  EXPECT_NE(
      md.find("| mixed | 3.1000 ± 0.1000 | 2.9000 ± 0.0000 | 2.0000 ± 0.0000 (1/2 diverged) |"),
      std::string::npos)
      << md;
  EXPECT_NE(md.find("| bf16-sr | 0.002 | 2.8000 | 0.9655 | 0.004 |"), std::string::npos) << md;
  // The lr chart: a strategy's line visits each complete point 4 times (mean,
  // +se, -se, mean); mixed's 4e-3 point is left out.
  const std::string svg = sweep_lr_svg(t);
  EXPECT_EQ(count_of(svg, "<polyline class=\"series\""), 2u);
}

// Paired differences from mixed: per seed, then mean and standard error over
// the seeds where both cells finished.
TEST(SweepReport, PairedDifferencesFromMixed) {
  SweepOptions o;
  o.strategies = {strategy_from_string("mixed"), strategy_from_string("bf16")};
  o.lrs = {1e-3, 2e-3};
  o.seeds = {1, 2, 3};
  const double nan = NAN;
  const std::vector<SweepCellResult> cells = {
      cell("mixed", 1e-3, 1, 3.0), cell("mixed", 1e-3, 2, 2.0), cell("mixed", 1e-3, 3, 1.0),
      cell("bf16", 1e-3, 1, 3.1),  cell("bf16", 1e-3, 2, 2.2),  cell("bf16", 1e-3, 3, 1.3),
      cell("mixed", 2e-3, 1, 2.0), cell("mixed", 2e-3, 2, nan), cell("mixed", 2e-3, 3, 2.0),
      cell("bf16", 2e-3, 1, 1.5),  cell("bf16", 2e-3, 2, 1.0),  cell("bf16", 2e-3, 3, nan),
  };
  const SweepTable t = summarize_sweep(o, cells);
  // lr 1e-3: differences 0.1, 0.2, 0.3 -> 0.2 +- sd 0.1 / sqrt(3), although
  // the unpaired spread of each strategy is ~0.58.
  EXPECT_EQ(t.at(1, 0).paired_seeds, 3);
  EXPECT_NEAR(t.at(1, 0).paired_mean, 0.2, 1e-12);
  EXPECT_NEAR(t.at(1, 0).paired_se, 0.1 / std::sqrt(3.0), 1e-12);
  // lr 2e-3: only seed 1 has both (seed 2's mixed and seed 3's bf16 diverged).
  EXPECT_EQ(t.at(1, 1).paired_seeds, 1);
  EXPECT_NEAR(t.at(1, 1).paired_mean, -0.5, 1e-12);
  EXPECT_EQ(t.at(1, 1).paired_se, 0.0);
  EXPECT_EQ(t.at(0, 0).paired_seeds, 3);  // mixed against itself: zero
  EXPECT_EQ(t.at(0, 0).paired_mean, 0.0);

  const std::string md = sweep_markdown(o, t, "", {});
  EXPECT_NE(md.find("## Paired differences from mixed"), std::string::npos) << md;
  EXPECT_NE(md.find("| bf16 | +0.2000 ± 0.0577 | -0.5000 ± 0.0000 |"), std::string::npos) << md;
  const nlohmann::json j = sweep_json(o, t, cells);
  EXPECT_EQ(j.at("points").at(2).at("vs_mixed_paired").at("seeds"), 3);
  EXPECT_NEAR(j.at("points").at(2).at("vs_mixed_paired").at("mean").get<double>(), 0.2, 1e-12);

  SweepOptions no_mixed = o;  // without mixed there is nothing to pair with
  no_mixed.strategies = {strategy_from_string("bf16")};
  std::vector<SweepCellResult> bf16_only(cells.begin() + 3, cells.begin() + 6);
  const SweepTable u = summarize_sweep(no_mixed, bf16_only);
  EXPECT_EQ(u.at(0, 0).paired_seeds, 0);
  EXPECT_EQ(sweep_markdown(no_mixed, u, "", {}).find("Paired differences"), std::string::npos);
}

TEST(SweepReport, AllDivergedStrategyHasNoBest) {
  SweepOptions o;
  o.strategies = {strategy_from_string("bf16")};
  o.lrs = {1.0};
  o.seeds = {1};
  const SweepTable t = summarize_sweep(o, {cell("bf16", 1.0, 1, NAN)});
  EXPECT_FALSE(t.summaries[0].has_best);
  EXPECT_NE(sweep_markdown(o, t, "", {}).find("diverged (1/1, step 8)"), std::string::npos);
  EXPECT_THROW(sweep_lr_svg(t), std::invalid_argument);
}

TEST(SweepGridNames, AblationsParseOrSayWhyNot) {
  const std::vector<Ablation> a = ablations_of("bf16-sr");
  ASSERT_EQ(a.size(), 5u);
  int expressible = 0;
  for (const Ablation& x : a) {
    if (x.spec.empty()) {
      EXPECT_FALSE(x.why.empty()) << x.what;
      continue;
    }
    ++expressible;
    EXPECT_EQ(strategy_from_string(x.spec).name, x.spec);
  }
  EXPECT_EQ(expressible, 5);
  EXPECT_EQ(a[0].spec, "bf16-sr:mround=sr,vround=sr");
  EXPECT_EQ(a[2].spec, "bf16-sr:g=f32");
  EXPECT_EQ(strategy_from_string(a[2].spec).grads(), DType::kF32);
  const std::vector<Ablation> f = ablations_of("fp32");
  EXPECT_TRUE(f[2].spec.empty());
  EXPECT_NE(f[2].why.find("fp32 already"), std::string::npos) << f[2].why;
  EXPECT_TRUE(strategy_from_string(a[0].spec).rule.m_sr);
  EXPECT_EQ(strategy_from_string("bf16-sr:v=f32").rule.v, DType::kF32);
  EXPECT_EQ(strategy_from_string("mixed:m=bf16,v=bf16").rule.master, MasterKind::kF32);
  EXPECT_THROW(ablations_of("nope"), std::invalid_argument);
  EXPECT_THROW(ablations_of("bf16-sr:v=f32"), std::invalid_argument);
}

TEST(SweepGridNames, FoldersLearningRatesAndDivergedSteps) {
  EXPECT_EQ(strategy_folder("bf16-sr:mround=sr,vround=sr"), "bf16-sr@mround=sr+vround=sr");
  EXPECT_EQ(lr_text(3e-4), "0.0003");
  EXPECT_EQ(lr_text(10), "10");
  EXPECT_EQ(std::strtod(lr_text(1.0 / 3.0).c_str(), nullptr), 1.0 / 3.0);
  EXPECT_EQ(diverged_step_of("loss is nan at step 12; stopping"), 12u);
  EXPECT_EQ(diverged_step_of("gradient norm is not finite at step 3; stopping"), 3u);
  EXPECT_EQ(diverged_step_of("no step here"), 0u);
  EXPECT_EQ(diverged_step_of("loss is nan at step ; stopping"), 0u);
  EXPECT_EQ(diverged_step_of("at step 99999999999999999999999"), 0u);
}

}  // namespace
}  // namespace srkit

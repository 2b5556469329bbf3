#include "lib/train/run_outputs.h"

#include <filesystem>
#include <optional>
#include <stdexcept>

#include "lib/checkpoint/checkpoint_dir.h"
#include "lib/util/dir_lock.h"

namespace srkit {
namespace {

namespace fs = std::filesystem;

// One name per file: links and "." or ".." resolved as far as the path exists.
fs::path identity(const std::string& path) {
  std::error_code ec;
  const fs::path p = fs::weakly_canonical(fs::absolute(path, ec), ec);
  return ec ? fs::path(path).lexically_normal() : p;
}

bool same_file(const std::string& a, const std::string& b) {
  if (identity(a) == identity(b)) return true;
  std::error_code ec;
  return fs::equivalent(a, b, ec);  // hard links; false (with ec) unless both exist
}

fs::path folder_of(const std::string& path) {
  const fs::path folder = identity(path).parent_path();
  return folder.empty() ? fs::path(".") : folder;
}

[[noreturn]] void collide(const OutputFile& f, const std::string& what) {
  throw std::invalid_argument(f.flag + " " + f.path + ": " + what +
                              "; give each output its own file");
}

// The checks of one output against everything it must not be.
// own_log: f is the log of runs[0] (not compared with itself; RunLog checks its lock).
void check_one(const OutputFile& f, const std::vector<RunOutputs>& runs,
               const std::vector<OutputFile>& earlier, bool own_log) {
  if (fs::path(f.path).filename() == ".srkit.lock") collide(f, "is a run folder's lock file");
  for (const OutputFile& other : earlier) {
    if (same_file(f.path, other.path))
      collide(f, "is also the file of " + other.flag + " " + other.path);
  }
  for (const RunOutputs& r : runs) {
    if (!own_log && same_file(f.path, r.log_file))
      collide(f, "is also the run's log (" + r.log_flag + " " + r.log_file + ")");
    if (folder_of(f.path) == identity(r.ckpt_dir) &&
        is_checkpoint_file_name(fs::path(f.path).filename().string()))
      collide(f, "is a checkpoint name in the run's checkpoint folder (" + r.ckpt_flag + " " +
                     r.ckpt_dir + ")");
  }
  if (!own_log && file_locked_elsewhere(f.path)) collide(f, "is the log of another live run");
  if (const std::optional<std::string> holder = DirLock::holder_elsewhere(folder_of(f.path)))
    collide(f, "is in " + folder_of(f.path).string() + ", the folder of another live run (" +
                   *holder + ")");
}

}  // namespace

RunOutputs run_outputs(const TrainConfig& c) {
  const std::string& name = c.strategy.name;
  RunOutputs r;
  r.log_file = c.log_file.empty() ? (fs::path(c.out_dir) / (name + ".jsonl")).string() : c.log_file;
  r.log_flag = c.log_file.empty() ? "--out" : "--log";
  r.ckpt_dir = c.ckpt_dir.empty() ? (fs::path(c.out_dir) / ("ckpt-" + name)).string() : c.ckpt_dir;
  r.ckpt_flag = c.ckpt_dir.empty() ? "--out" : "--ckpt-dir";
  return r;
}

void check_output_files(const std::vector<RunOutputs>& runs, const std::vector<OutputFile>& files) {
  std::vector<OutputFile> checked;
  for (const OutputFile& f : files) {
    check_one(f, runs, checked, false);
    checked.push_back(f);
  }
}

void check_log_output(const RunOutputs& run) {
  check_one({run.log_flag, run.log_file}, {run}, {}, true);
}

}  // namespace srkit

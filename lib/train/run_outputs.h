// The files a training run writes, and the check, before step 1, that no two of
// them are one file and that none belongs to another live run. Without it a
// --json summary pointed at the run's own log, at its final checkpoint or at
// another run's log silently replaced that file.
//
// What a run owns: its JSONL log, the checkpoint files (ckpt_<step>.safetensors)
// in its checkpoint folder, and the files the command adds (sr-train's --json
// summary and the comparison's chart). What another run owns: every file in a
// folder whose lock (lib/util/dir_lock.h) another process holds, and a log that
// another run has locked. Folder lock files (.srkit.lock) are never outputs.
#pragma once

#include <string>
#include <vector>

#include "lib/train/train_config.h"

namespace srkit {

// Where one Trainer writes; flags name the option each path came from.
struct RunOutputs {
  std::string log_file;
  std::string log_flag;  // --log, or --out for the default
  std::string ckpt_dir;
  std::string ckpt_flag;  // --ckpt-dir, or --out for the default
};

// The paths Trainer uses for this config (defaults resolved from --out).
RunOutputs run_outputs(const TrainConfig& c);

// A file a command writes beside the runs' own outputs.
struct OutputFile {
  std::string flag;  // e.g. --json
  std::string path;
};

// Throws std::invalid_argument, one line naming both sides, when one of
// `files` is the same file as another of them or as a run's log, is a
// checkpoint name in a run's checkpoint folder, is a folder lock file, or is
// held by another live run (a locked log, or a file in a folder another process
// has locked). Call before the runs start.
void check_output_files(const std::vector<RunOutputs>& runs, const std::vector<OutputFile>& files);

// The same for a run's own log, called by the Trainer once it holds its
// folders (RunLog itself refuses a log another run has locked).
void check_log_output(const RunOutputs& run);

}  // namespace srkit

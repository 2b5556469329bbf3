// A run owns its output folder: an advisory lock (flock) on DIR/.srkit.lock,
// held for the owner's life, makes a second run on the same folder fail at once
// with a line naming the folder and the process that holds it, instead of the
// two interleaving checkpoints and logs. The lock file keeps the holder's pid
// and command line for that message; it is left in place (removing it would
// race with a run that is just opening it). The kernel drops the lock when the
// process dies, however it dies.
//
// Locks are per process: sr-train --compare runs one Trainer per strategy in
// one process, and a second acquire of a directory this process holds shares
// the first.
#pragma once

#include <memory>
#include <optional>
#include <string>

namespace srkit {

// Whether an flock is held on the regular file at path (a live run's JSONL
// log, lib/train/run_log.h) through another open file: another process's, or
// one this process opened elsewhere (flock locks belong to open files). The
// file is opened without following a link and without blocking, so a FIFO or a
// device is answered "no".
bool file_locked_elsewhere(const std::string& path);

class DirLock {
 public:
  // Locks dir (which must exist). flag names the option the directory came
  // from, for the error. Throws std::runtime_error if another process holds it.
  static std::shared_ptr<DirLock> acquire(const std::string& dir, const std::string& flag);
  ~DirLock();
  DirLock(const DirLock&) = delete;
  DirLock& operator=(const DirLock&) = delete;

  const std::string& dir() const { return dir_; }

  // The holder ("pid N (command) since T") when a process other than this one
  // holds dir's lock, else nothing (no lock file, a free lock, or this
  // process's own). Asks with a shared lock taken and dropped at once, so for
  // that instant a rival's acquire can be refused as if this process held it.
  static std::optional<std::string> holder_elsewhere(const std::string& dir);

 private:
  DirLock(std::string dir, int fd, int pid) : dir_(std::move(dir)), fd_(fd), pid_(pid) {}
  std::string dir_;  // canonical
  int fd_;
  int pid_;  // the holder: a forked child inherits the registry, not the ownership
};

}  // namespace srkit

// Shell-style file patterns (*, ?, [..]) expanded to a sorted list of paths.
#pragma once

#include <string>
#include <vector>

namespace srkit {

// True when `pattern` contains a glob metacharacter.
bool has_glob_chars(const std::string& pattern);

// The regular files matching `pattern`, sorted bytewise (so zero-padded shard
// numbers come out in order); throws a one-line error naming the pattern when
// nothing matches. A pattern without metacharacters names one file and comes
// back as is, unchecked: the reader that opens it reports what is wrong with it.
std::vector<std::string> glob_files(const std::string& pattern);

}  // namespace srkit

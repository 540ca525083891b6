// atomic_file.hpp: outputs written so that a reader (or a run that follows a killed one) sees the
// old file or the whole new one, never a part: the bytes go to a temporary name beside the target
// (same directory, so the same file system), are flushed, and the temporary is renamed into place.
// A directory of outputs (--save) is filled under a staging name and swapped into place at the end.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace collmm {

// Writes the parts, one after the other, to `path` atomically (see above). Throws
// std::runtime_error naming the path and the system's reason; the temporary is removed then.
void write_file_atomically(const std::string& path, const std::vector<std::string_view>& parts);
inline void write_file_atomically(const std::string& path, std::string_view text) {
  write_file_atomically(path, std::vector<std::string_view>{text});
}

// Why `path` cannot be written as an output ("" when it can), probed without changing it: opened
// for appending where it exists, else created and removed. The reason is the system's ("No such
// file or directory") or "it is a directory". What the front ends check before any work.
std::string why_not_writable(const std::string& path);

// The staging directory of `dir`: "<dir>.partial".
std::string staging_dir(const std::string& dir);
// Makes an empty staging directory for `dir` (removing what a killed run left there).
void start_staging_dir(const std::string& dir);
// Puts the filled staging directory in place of `dir`: swapped atomically with an existing one
// (renameat2 RENAME_EXCHANGE), whose old files are then removed; renamed when there is none.
void publish_staging_dir(const std::string& dir);

}  // namespace collmm

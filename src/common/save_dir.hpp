// save_dir.hpp: --save DIR, a directory of outputs shared with whatever else DIR holds. The save's
// files are written (by every process, each through write_file_atomically) into a staging
// directory inside DIR, ".collmm-save-XXXXXX", made by process 0 under an unpredictable name. They
// are moved into DIR one by one once every rank has saved. Nothing in DIR but a file of the save's own
// name is ever replaced, and nothing is removed: a user's files and directories stay, and so do the
// files of an earlier save that this one does not write. A run that fails or is killed before the
// move leaves DIR's files as they were and its own in the staging directory.
#pragma once

#include <string>
#include <vector>

namespace collmm {

// Makes DIR's staging directory (mode 0700); returns its path. Throws std::runtime_error.
std::string start_save(const std::string& dir);

// The regular files of `dir` (names only). Throws std::runtime_error.
std::vector<std::string> files_of(const std::string& dir);

// Moves every file of `staging` into `dir`, then removes `staging`. A file of the same name in dir
// is replaced (its mode, and where this process may its owner, kept). One that is not a regular
// file (a directory, a link, a device) is not: the error names it, before anything is moved, and
// the save stays in `staging`. So does one this process may not replace (why_not_replaceable).
// Throws std::runtime_error.
void finish_save(const std::string& dir, const std::string& staging);

}  // namespace collmm

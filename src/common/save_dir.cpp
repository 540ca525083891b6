// save_dir.cpp: --save's staging directory and the move of its files (src/common/save_dir.hpp).
#include "save_dir.hpp"

#include <dirent.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <vector>

#include "atomic_file.hpp"
#include "quote.hpp"

namespace collmm {
namespace {

std::string strip_slashes(std::string dir) {
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  return dir;
}

}  // namespace

// The regular files of `dir` (names only).
std::vector<std::string> files_of(const std::string& dir) {
  DIR* d = ::opendir(dir.c_str());
  if (!d) throw std::runtime_error("cannot read " + quote(dir) + " (" + std::strerror(errno) + ")");
  std::vector<std::string> names;
  while (const dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    struct stat st {};
    if (name != "." && name != ".." && ::lstat((dir + "/" + name).c_str(), &st) == 0 && S_ISREG(st.st_mode))
      names.push_back(name);
  }
  ::closedir(d);
  return names;
}

std::string start_save(const std::string& dir) {
  std::string name = strip_slashes(dir) + "/.collmm-save-XXXXXX";
  if (!::mkdtemp(name.data()))
    throw std::runtime_error("--save: cannot create a directory in " + quote(dir) + " (" + std::strerror(errno) + ")");
  return name;
}

void finish_save(const std::string& dir, const std::string& staging) {
  const std::string into = strip_slashes(dir);
  const std::vector<std::string> names = files_of(staging);
  for (const std::string& name : names) {  // every target checked before any file moves
    const std::string target = into + "/" + name;
    struct stat st {};
    if (::lstat(target.c_str(), &st) != 0) continue;
    if (!S_ISREG(st.st_mode))
      throw std::runtime_error("--save: cannot write " + quote(target) +
                               " (it exists and is not a regular file: left as it is; this run's files are in " +
                               quote(staging) + ")");
    if (const std::string why = why_not_replaceable(target); !why.empty())
      throw std::runtime_error("--save: cannot write " + quote(target) + " (" + why + "); this run's files are in " +
                               quote(staging));
    const std::string staged = staging + "/" + name;
    ::chmod(staged.c_str(), st.st_mode & 07777);
    if (::geteuid() == 0 && ::chown(staged.c_str(), st.st_uid, st.st_gid) == 0)
      ::chmod(staged.c_str(), st.st_mode & 07777);
  }
  for (const std::string& name : names)
    if (std::rename((staging + "/" + name).c_str(), (into + "/" + name).c_str()) != 0)
      throw std::runtime_error("--save: cannot move " + quote(staging + "/" + name) + " into " + quote(into) + " (" +
                               std::strerror(errno) + "; this run's files are in " + quote(staging) + ")");
  if (::rmdir(staging.c_str()) != 0)
    throw std::runtime_error("--save: cannot remove " + quote(staging) + " (" + std::strerror(errno) + ")");
}

}  // namespace collmm

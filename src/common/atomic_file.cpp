// atomic_file.cpp: temporary name, flush, rename (src/common/atomic_file.hpp).
#include "atomic_file.hpp"

#include <fcntl.h>
#include <stdio.h>  // renameat2, RENAME_EXCHANGE (glibc >= 2.28)
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <stdexcept>

#include "fault_point.hpp"

namespace collmm {
namespace {

[[noreturn]] void fail(const std::string& what, const std::string& path, int err) {
  throw std::runtime_error("cannot " + what + " " + path + " (" + std::strerror(err) + ")");
}

}  // namespace

void write_file_atomically(const std::string& path, const std::vector<std::string_view>& parts) {
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) fail("write", path, errno);
  fault_point("write");  // tests: a process killed here must leave `path` as it was
  for (std::string_view part : parts) {
    while (!part.empty()) {
      const ssize_t n = ::write(fd, part.data(), part.size());
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        const int err = errno;
        ::close(fd);
        ::unlink(tmp.c_str());
        fail("write", path, err);
      }
      part.remove_prefix(static_cast<size_t>(n));
    }
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    fail("write", path, err);
  }
  fault_point("rename");  // tests: so must a process killed here, its temporary whole
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    fail("write", path, err);
  }
}

std::string why_not_writable(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode)) return "it is a directory";
    const int fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
    if (fd < 0) return std::strerror(errno);
    ::close(fd);
    return "";
  }
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return std::strerror(errno);
  ::close(fd);
  ::unlink(path.c_str());
  return "";
}

std::string staging_dir(const std::string& dir) {
  std::string d = dir;
  while (d.size() > 1 && d.back() == '/') d.pop_back();
  return d + ".partial";
}

void start_staging_dir(const std::string& dir) {
  const std::string staging = staging_dir(dir);
  std::error_code ec;
  std::filesystem::remove_all(staging, ec);
  if (!std::filesystem::create_directories(staging, ec) && !std::filesystem::is_directory(staging))
    throw std::runtime_error("cannot create directory " + staging + " (" + ec.message() + ")");
}

void publish_staging_dir(const std::string& dir) {
  const std::string staging = staging_dir(dir);
  std::string target = dir;
  while (target.size() > 1 && target.back() == '/') target.pop_back();
  if (::renameat2(AT_FDCWD, staging.c_str(), AT_FDCWD, target.c_str(), RENAME_EXCHANGE) == 0) {
    std::error_code ec;
    std::filesystem::remove_all(staging, ec);  // the previous run's files, now under the staging name
    return;
  }
  if (errno != ENOENT) fail("swap " + staging + " with", target, errno);
  if (std::rename(staging.c_str(), target.c_str()) != 0) fail("rename " + staging + " to", target, errno);
}

}  // namespace collmm

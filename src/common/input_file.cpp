// input_file.cpp: the reader of a user's input files (src/common/input_file.hpp).
#include "input_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace collmm {
namespace {

std::string kind_of(mode_t mode) {
  if (S_ISDIR(mode)) return "it is a directory";
  if (S_ISCHR(mode)) return "it is a character device, not a regular file";
  if (S_ISBLK(mode)) return "it is a block device, not a regular file";
  if (S_ISFIFO(mode)) return "it is a FIFO, not a regular file";
  if (S_ISSOCK(mode)) return "it is a socket, not a regular file";
  return "it is not a regular file";
}

std::string too_big(int64_t bytes, int64_t max_bytes) {
  return "it holds " + std::to_string(bytes) + " bytes, more than the limit of " + std::to_string(max_bytes) + " bytes";
}

}  // namespace

std::string read_input_file(const std::string& path, int64_t max_bytes, std::string& text) {
  text.clear();
  // O_NONBLOCK: a FIFO without a writer is refused below instead of blocking the open.
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    struct stat st {};
    if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) return kind_of(st.st_mode);
    return std::strerror(err);
  }
  struct stat st {};
  std::string why;
  if (::fstat(fd, &st) != 0) {
    why = std::strerror(errno);
  } else if (!S_ISREG(st.st_mode)) {
    why = kind_of(st.st_mode);
  } else if (st.st_size > max_bytes) {
    why = too_big(st.st_size, max_bytes);
  } else {
    // The file may grow while it is read: never more than the limit.
    text.resize(static_cast<size_t>(st.st_size));
    size_t got = 0;
    while (why.empty()) {
      if (got == text.size()) {
        if (static_cast<int64_t>(text.size()) >= max_bytes + 1) break;
        text.resize(std::min<size_t>(static_cast<size_t>(max_bytes) + 1, text.size() + 65536));
      }
      const ssize_t n = ::read(fd, text.data() + got, text.size() - got);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) why = std::strerror(errno);
      if (n <= 0) break;
      got += static_cast<size_t>(n);
    }
    text.resize(got);
    if (why.empty() && static_cast<int64_t>(got) > max_bytes) why = too_big(static_cast<int64_t>(got), max_bytes);
  }
  ::close(fd);
  if (!why.empty()) text.clear();
  return why;
}

}  // namespace collmm

// atomic_file.cpp: the output writer and its probe (src/common/atomic_file.hpp).
#include "atomic_file.hpp"

#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <random>
#include <stdexcept>

#include "fault_point.hpp"
#include "quote.hpp"

namespace collmm {
namespace {

// `what`: a quoted path, or words naming one.
[[noreturn]] void fail(const std::string& what, const std::string& why) {
  throw std::runtime_error("cannot write " + what + " (" + why + ")");
}

std::string directory_of(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

std::string base_of(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

std::string link_text(const std::string& path) {
  char buf[PATH_MAX];
  const ssize_t n = ::readlink(path.c_str(), buf, sizeof buf - 1);
  return n < 0 ? std::string("?") : std::string(buf, static_cast<size_t>(n));
}

// Whether `path` names an open descriptor (/dev/stdout, /dev/fd/N, /proc/PID/fd/N), itself or by
// the symbolic links it goes through: written through (appending), never replaced.
bool names_a_descriptor(std::string path) {
  for (int hops = 0; hops < 40; ++hops) {
    if (path.rfind("/proc/", 0) == 0 || path.rfind("/dev/fd/", 0) == 0) return true;
    struct stat st {};
    if (::lstat(path.c_str(), &st) != 0 || !S_ISLNK(st.st_mode)) return false;
    const std::string text = link_text(path);
    path = text.rfind('/', 0) == 0 ? text : directory_of(path) + "/" + text;
  }
  return false;
}

// Why this process may not rename a file over `target` (an existing file, `st` its stat) though it
// may write into it ("" when it may). The sticky bit of its directory (as in /tmp) lets only the
// file's owner, the directory's owner or root replace or remove it.
std::string sticky_refusal(const std::string& target, const struct stat& st) {
  const std::string dir = directory_of(target);
  struct stat dst {};
  if (::stat(dir.c_str(), &dst) != 0 || !(dst.st_mode & S_ISVTX)) return "";
  const uid_t me = ::geteuid();
  if (me == 0 || st.st_uid == me || dst.st_uid == me) return "";
  return "it belongs to uid " + std::to_string(st.st_uid) + " in the sticky directory " + quote(dir) +
         ", where only its owner may replace it, and collmm replaces every file it writes; give a path of this "
         "user's own";
}

// A path as the writer finds it: absent (created), a regular file (replaced: `target` is the file
// itself, a symbolic link resolved), or written through (`fd` open for appending, blocking).
struct Target {
  std::string target;
  bool exists = false, through = false;
  std::string refused;  // why the file cannot be replaced though it can be written (sticky_refusal)
  struct stat st {};
  int fd = -1;
};

// Fills `t` for `path`; returns why it cannot be written ("" when it can). Never blocks: a FIFO is
// opened with O_NONBLOCK (ENXIO when no process reads it).
std::string resolve(const std::string& path, Target& t) {
  if (path.empty()) return "the path is empty";
  struct stat lst {};
  if (::lstat(path.c_str(), &lst) != 0) {
    if (errno != ENOENT) return std::strerror(errno);
    t.target = path;
    return "";
  }
  if (S_ISDIR(lst.st_mode)) return "it is a directory";
  const int fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    struct stat st {};
    const bool resolves = ::stat(path.c_str(), &st) == 0;
    if (S_ISLNK(lst.st_mode) && !resolves && err == ENOENT)
      return "it is a symbolic link to " + quote(link_text(path)) + ", which does not exist";
    if (resolves && S_ISDIR(st.st_mode)) return "it is a directory";
    if (resolves && S_ISFIFO(st.st_mode) && err == ENXIO) return "it is a FIFO that no process reads";
    if (resolves && S_ISSOCK(st.st_mode)) return "it is a socket";
    return std::strerror(err);
  }
  t.exists = true;
  ::fstat(fd, &t.st);
  if (S_ISREG(t.st.st_mode) && !names_a_descriptor(path)) {
    ::close(fd);
    t.target = path;
    if (!S_ISLNK(lst.st_mode)) return t.refused = sticky_refusal(path, t.st);
    char real[PATH_MAX];
    struct stat st {};
    if (!::realpath(path.c_str(), real) || ::stat(real, &st) != 0 || st.st_dev != t.st.st_dev ||
        st.st_ino != t.st.st_ino)
      return "its symbolic link changed while it was resolved";
    t.target = real;
    return t.refused = sticky_refusal(real, t.st);
  }
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  t.through = true;
  t.fd = fd;
  t.target = path;
  return "";
}

// Descriptors the probe opened for paths written through, kept until the write takes them.
std::mutex g_held_mutex;
std::map<std::string, int> g_held;  // guarded by g_held_mutex

void hold(const std::string& path, int fd) {
  std::lock_guard<std::mutex> lock(g_held_mutex);
  auto [it, added] = g_held.emplace(path, fd);
  if (!added) {
    ::close(it->second);
    it->second = fd;
  }
}

int take_held(const std::string& path) {
  std::lock_guard<std::mutex> lock(g_held_mutex);
  const auto it = g_held.find(path);
  if (it == g_held.end()) return -1;
  const int fd = it->second;
  g_held.erase(it);
  return fd;
}

// Writes every part to `fd`; 0 or the errno of the failure. SIGPIPE (a FIFO's reader gone) is held
// back while writing, so that it is an error (EPIPE) and not the end of the process.
int write_parts(int fd, const std::vector<std::string_view>& parts) {
  sigset_t pipe_signal, old;
  sigemptyset(&pipe_signal);
  sigaddset(&pipe_signal, SIGPIPE);
  ::pthread_sigmask(SIG_BLOCK, &pipe_signal, &old);
  int err = 0;
  for (std::string_view part : parts) {
    while (!part.empty() && err == 0) {
      const ssize_t n = ::write(fd, part.data(), part.size());
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) err = errno;
      if (n == 0) err = EIO;
      if (n > 0) part.remove_prefix(static_cast<size_t>(n));
    }
  }
  if (err == EPIPE) {
    const timespec now{0, 0};
    ::sigtimedwait(&pipe_signal, nullptr, &now);  // the pending SIGPIPE of this write
  }
  ::pthread_sigmask(SIG_SETMASK, &old, nullptr);
  return err;
}

// A new temporary in `dir`: its descriptor, or -errno.
int open_temporary(const std::string& dir, const std::string& stem, unsigned mode, std::string& name) {
  static const char kChars[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  std::random_device random;
  for (int attempt = 0; attempt < 100; ++attempt) {
    std::string suffix(12, 'x');
    for (char& c : suffix) c = kChars[random() % (sizeof kChars - 1)];
    name = (dir == "/" ? "" : dir) + "/" + stem + ".tmp." + suffix;
    const int fd = ::open(name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
    if (fd >= 0) return fd;
    if (errno != EEXIST) return -errno;
  }
  return -EEXIST;
}

// The replaced file's mode, and its owner and group where this process may set them (root: both;
// others: the group, where they belong to it). The mode is kept whatever the owner.
void keep_mode_and_owner(int fd, const struct stat& st) {
  ::fchmod(fd, st.st_mode & 07777);
  if (::geteuid() == 0) {
    if (::fchown(fd, st.st_uid, st.st_gid) == 0) ::fchmod(fd, st.st_mode & 07777);  // chown clears set-id bits
  } else if (st.st_gid != ::getegid() && ::fchown(fd, static_cast<uid_t>(-1), st.st_gid) == 0) {
    ::fchmod(fd, st.st_mode & 07777);
  }
}

}  // namespace

int create_temporary(const std::string& dir, const std::string& stem, unsigned mode, std::string& name,
                     const std::string& what) {
  const int fd = open_temporary(dir, stem, mode, name);
  if (fd < 0) fail(what, std::strerror(-fd));
  return fd;
}

void write_file_atomically(const std::string& path, const std::vector<std::string_view>& parts) {
  Target t;
  if (const int held = take_held(path); held >= 0) {
    t.through = true;
    t.fd = held;
  } else if (const std::string why = resolve(path, t); !why.empty() && t.refused.empty()) {
    fail(quote(path), why);
  }
  if (t.through) {
    int err = write_parts(t.fd, parts);
    if (::close(t.fd) != 0 && err == 0) err = errno;
    if (err) fail(quote(path), std::strerror(err));
    return;
  }
  std::string tmp;
  const int fd = create_temporary(directory_of(t.target), base_of(t.target), t.exists ? 0600 : 0666, tmp, quote(path));
  if (t.exists) keep_mode_and_owner(fd, t.st);
  fault_point("write");  // tests: a process killed here must leave `path` as it was
  int err = write_parts(fd, parts);
  if (err == 0 && ::fsync(fd) != 0) err = errno;
  if (::close(fd) != 0 && err == 0) err = errno;
  if (err == 0) {
    fault_point("rename");  // tests: so must a process killed here, its temporary whole
    if (t.refused.empty() && std::rename(tmp.c_str(), t.target.c_str()) == 0) return;
    // The bytes are whole and flushed: kept under the temporary's name, which the message gives.
    const std::string why = t.refused.empty() ? std::strerror(errno) : t.refused;
    fail(quote(path), why + "; what was to be written is kept in " + quote(tmp));
  }
  ::unlink(tmp.c_str());
  fail(quote(path), std::strerror(err));
}

std::string why_not_replaceable(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return "";
  char real[PATH_MAX];
  return sticky_refusal(::realpath(path.c_str(), real) ? std::string(real) : path, st);
}

std::string why_not_writable(const std::string& path) {
  Target t;
  if (std::string why = resolve(path, t); !why.empty()) return why;
  if (t.through) {
    hold(path, t.fd);
    return "";
  }
  std::string tmp;
  const int fd = open_temporary(directory_of(t.target), base_of(t.target), 0600, tmp);
  if (fd < 0) return std::strerror(-fd);
  fault_point("probe");  // tests: a process held here must not touch `path` (another job may write it)
  ::close(fd);
  ::unlink(tmp.c_str());
  return "";
}

}  // namespace collmm

// atomic_file.hpp: the one writer of every file collmm writes, and its probe before any work.
// A regular file (or a path not there yet) is written so that a reader, or a run after a killed
// one, sees the old file or the whole new one. The bytes go to a temporary created with
// O_CREAT|O_EXCL|O_NOFOLLOW under an unpredictable name beside the target (same directory, same
// file system). They are flushed, and the temporary is renamed over the target; an existing file's
// mode (and, where the writer may, its owner and group) is kept. A path that is not a regular file (a
// character device such as /dev/null, a FIFO with a reader, /dev/stdout) is written through: opened
// and written in place, never replaced. A symbolic link is followed as open() follows it (the
// file it names is replaced, the link kept); a dangling one is refused. Nothing else under the
// target's name is ever created or removed. A file this process could write but not replace (its
// directory's sticky bit, as in /tmp, and another user's file) is refused, by the probe before any
// work as by the writer. Where the final rename still fails, the written temporary is kept and
// the error names it.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace collmm {

// Writes the parts, one after the other, to `path` (see above). Throws std::runtime_error
// "cannot write 'PATH' (reason)" with the system's reason (a full disk: "No space left on device");
// the temporary is removed then, unless it is whole and only its rename failed (the reason names it).
void write_file_atomically(const std::string& path, const std::vector<std::string_view>& parts);
inline void write_file_atomically(const std::string& path, std::string_view text) {
  write_file_atomically(path, std::vector<std::string_view>{text});
}

// Why `path` cannot be written as an output ("" when it can), probed without blocking and without
// changing anything under its name. A file is opened for writing (not truncated) where it exists,
// and a temporary is created and removed beside it. The reason is the system's ("No such file or
// directory") or says what the path is ("it is a directory", "it is a FIFO that no process reads",
// "it is a symbolic link to T, which does not exist"). A path written through keeps the descriptor
// the probe opened until write_file_atomically uses it, so that a FIFO's reader does not see its
// end in between. What the front ends check before any work.
std::string why_not_writable(const std::string& path);

// Why this process could write an existing regular file `path` but not replace it ("" when it
// can, or when `path` is not one): the sticky bit of its directory, the file another user's.
std::string why_not_replaceable(const std::string& path);

// A temporary file created in `dir` as above, named `stem` + ".tmp." + random characters, opened
// for writing with `mode` (before the umask). Returns its descriptor and sets `name` to its path;
// throws std::runtime_error "cannot write `what` (reason)"; `what` is a quoted path or words.
int create_temporary(const std::string& dir, const std::string& stem, unsigned mode, std::string& name,
                     const std::string& what);

}  // namespace collmm

// input_file.hpp: the one reader of the files a user gives collmm as input (a --profile, a
// --tune-cache). Only a regular file is read, and only up to a size limit (collmm/sizes.hpp's
// kMaxInputFileBytes). A device that never ends (/dev/zero), a FIFO or a huge sparse file is
// refused before anything is read, so that no input can exhaust the node's memory.
#pragma once

#include <cstdint>
#include <string>

namespace collmm {

// Reads `path` whole into `text`. Returns why it cannot ("" when it could): the system's reason
// ("No such file or directory"), "it is a directory", "it is a character device, not a regular
// file", or "it holds N bytes, more than the limit of L bytes". Never blocks (O_NONBLOCK).
std::string read_input_file(const std::string& path, int64_t max_bytes, std::string& text);

}  // namespace collmm

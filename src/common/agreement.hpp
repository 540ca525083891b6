// agreement.hpp: collective checks that end a job cleanly before any data moves: options that
// differ between processes, and an error that some process found in its own options. Every
// process calls them at the same point and every process throws the same UsageError, so each one
// can print it and exit: nobody is left waiting in a collective.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "collmm/types.hpp"
#include "host_comm.hpp"

namespace collmm {

// Allgathers every process's (key, value) list; if any value differs from process 0's, throws
// UsageError "ranks disagree on M: rank 0 has 64, rank 1 has 48; ..." naming every differing key.
void check_processes_agree(HostComm& host, const std::vector<std::pair<std::string, std::string>>& mine);

// Allgathers every process's error (empty: none). Throws UsageError with this process's own error,
// or else "rank q: <its error>" for the first process that has one.
void raise_if_any_process_failed(HostComm& host, const std::string& my_error);

// Both checks above and an allgather of `mine` (numbers each process may hold differently, such as
// its split sizes; the same count on every process), in one allgather of numbers when all is well.
// Each process sends an error flag, a fingerprint of its keys and `mine`. Only when some process
// has an error or a fingerprint differs do the two full exchanges follow, on every process alike,
// and they throw the same UsageError everywhere. With one process nothing is exchanged. Returns
// every process's `mine`. What a call that runs often (a PyTorch op) agrees with.
std::vector<std::vector<double>> agree_and_gather(HostComm& host, const std::string& my_error,
                                                  const std::vector<std::pair<std::string, std::string>>& keys,
                                                  const std::vector<double>& mine);

}  // namespace collmm

// agreement.cpp: option agreement across processes and shared failure, both via HostComm::allgather.
#include "agreement.hpp"

#include <cstdint>
#include <functional>
#include <sstream>

namespace collmm {
namespace {

// "key=value" lines; values never hold a newline.
std::string serialize(const std::vector<std::pair<std::string, std::string>>& kv) {
  std::string s;
  for (const auto& [key, value] : kv) s += key + "=" + value + "\n";
  return s;
}

std::vector<std::pair<std::string, std::string>> parse(const std::string& s) {
  std::vector<std::pair<std::string, std::string>> kv;
  std::istringstream in(s);
  std::string line;
  while (std::getline(in, line)) {
    const size_t eq = line.find('=');
    kv.emplace_back(line.substr(0, eq), eq == std::string::npos ? "" : line.substr(eq + 1));
  }
  return kv;
}

std::string value_of(const std::vector<std::pair<std::string, std::string>>& kv, const std::string& key) {
  for (const auto& [k, v] : kv)
    if (k == key) return v;
  return "(nothing)";
}

}  // namespace

void check_processes_agree(HostComm& host, const std::vector<std::pair<std::string, std::string>>& mine) {
  const std::vector<std::string> all = host.allgather(serialize(mine));
  std::vector<std::vector<std::pair<std::string, std::string>>> parsed;
  for (const std::string& s : all) parsed.push_back(parse(s));

  std::ostringstream msg;
  for (const auto& [key, ignored] : parsed[0]) {
    const std::string first = value_of(parsed[0], key);
    std::ostringstream differing;
    for (size_t q = 1; q < parsed.size(); ++q) {
      const std::string v = value_of(parsed[q], key);
      if (v != first) differing << ", rank " << q << " has " << v;
    }
    if (!differing.str().empty())
      msg << (msg.str().empty() ? "" : "; ") << key << ": rank 0 has " << first << differing.str();
  }
  if (!msg.str().empty()) throw UsageError("ranks disagree on " + msg.str());
}

void raise_if_any_process_failed(HostComm& host, const std::string& my_error) {
  const std::vector<std::string> all = host.allgather(my_error);
  if (!my_error.empty()) throw UsageError(my_error);
  for (size_t q = 0; q < all.size(); ++q)
    if (!all[q].empty()) throw UsageError("rank " + std::to_string(q) + ": " + all[q]);
}

std::vector<std::vector<double>> agree_and_gather(HostComm& host, const std::string& my_error,
                                                  const std::vector<std::pair<std::string, std::string>>& keys,
                                                  const std::vector<double>& mine) {
  if (host.procs() == 1) {
    if (!my_error.empty()) throw UsageError(my_error);
    return {mine};
  }
  // The fingerprint as two exact 32-bit halves (a double holds 53 bits).
  const uint64_t print = std::hash<std::string>{}(serialize(keys));
  std::vector<double> sent{my_error.empty() ? 0.0 : 1.0, static_cast<double>(print >> 32),
                           static_cast<double>(print & 0xffffffffu)};
  sent.insert(sent.end(), mine.begin(), mine.end());
  const std::vector<double> all = host.allgather(sent);
  const size_t width = sent.size(), procs = static_cast<size_t>(host.procs());
  bool trouble = all.size() != procs * width;
  for (size_t q = 0; q < procs && !trouble; ++q)
    trouble = all[q * width] != 0 || all[q * width + 1] != all[1] || all[q * width + 2] != all[2];
  if (trouble) {  // every process sees the same numbers, so every process comes here
    raise_if_any_process_failed(host, my_error);
    check_processes_agree(host, keys);
    throw UsageError(
        "ranks disagree on the call's fingerprint, yet no key differs (builds that hash strings differently?)");
  }
  std::vector<std::vector<double>> out;
  for (size_t q = 0; q < procs; ++q)
    out.emplace_back(all.begin() + static_cast<long>(q * width + 3), all.begin() + static_cast<long>((q + 1) * width));
  return out;
}

}  // namespace collmm

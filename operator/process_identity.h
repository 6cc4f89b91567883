#pragma once
// Who a process is, read from the kernel rather than from anything the process (or a client of
// it) could write: its start time and the executable it runs. A pid alone names a different
// process once the kernel reuses it, and argv[0] is whatever the starter chose; the pair (pid,
// start time) names one process for the life of the machine, and /proc/<pid>/exe is the file the
// kernel actually executes. `sparkglm stop` signals only a process whose identity matches the one
// recorded at start, and `status` reports the version of that executable, never a log line.
#include <cstdint>
#include <optional>
#include <string>

namespace sparkglm::operator_tool {

struct ProcessIdentity {
  int pid = 0;
  uint64_t start_ticks = 0;  // /proc/<pid>/stat field 22: clock ticks after boot
  std::string exe;           // /proc/<pid>/exe, without the kernel's " (deleted)" suffix
  bool exe_deleted = false;  // the file was replaced or removed since the process started
};

// The live (not zombie) process `pid`, or nullopt when there is none or it cannot be inspected.
std::optional<ProcessIdentity> read_process_identity(int pid);

// Whether `live` is the process recorded as `recorded`: same pid, same start time, same executable
// path (a rebuilt binary still matches: the running one is then marked deleted).
bool same_process(const ProcessIdentity& live, const ProcessIdentity& recorded);

// Whether the recorded process has ended: its pid names no process, a zombie, or a process with
// another start time. Reads only /proc/<pid>/stat, so a process that is exiting (its executable
// already unreadable, not yet a zombie) still counts as running.
bool has_exited(const ProcessIdentity& recorded);

// SHA-256 of the executable the process runs, read through /proc/<pid>/exe (the running file even
// when its path now holds another). Throws Error(kIo).
std::string executable_sha256(int pid);

// The first line of `PROGRAM --version` and its "commit:" line, as "sparkglm-serve 0.3.0 (commit
// abc123)"; run with a 10 s limit. Throws Error(kIo) when it fails or prints nothing.
std::string program_version(const std::string& program);

// Sends `signal` to the process only if it is still `recorded`: through a pidfd (opened first,
// then the identity checked), so a pid reused between the check and the signal cannot be hit.
// Returns false when the process is not (or no longer) the recorded one.
bool signal_if_same(const ProcessIdentity& recorded, int signal);

}  // namespace sparkglm::operator_tool

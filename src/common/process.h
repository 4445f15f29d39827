// Child processes. RunProcess runs a helper program to completion (egg bench's report generator, the
// sandbox's trial start) and returns its exit status, or -1 when it could not be started; its output is
// appended to `log_path` (empty: inherited).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <functional>
#include <string>
#include <vector>

namespace egg {

int RunProcess(const std::vector<std::string>& argv, const std::vector<std::string>& env, const std::string& log_path);

// `name_or_path` when it holds a '/' and is executable, else the first executable of that name on $PATH.
std::optional<std::string> FindExecutable(const std::string& name_or_path);

// The resident anonymous memory (resident minus file-backed and shared pages) of `root` and every process
// descended from it, in bytes, read from /proc; 0 when none can be read.
uint64_t ProcessTreeAnonBytes(pid_t root);

// Runs a helper program to completion, calling `on_line` with each line it writes on stdout (without the
// newline) as it comes; its stderr is inherited. The helper is killed when egg dies. Returns its exit status,
// or -1 when it could not be started or was killed. An exception from `on_line` kills the helper and
// propagates.
int RunProcessLines(const std::vector<std::string>& argv, const std::vector<std::string>& env,
                    const std::function<void(const std::string&)>& on_line);

}  // namespace egg

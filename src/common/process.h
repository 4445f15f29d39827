// Runs a helper program to completion (egg bench's report generator). Returns its exit status, or -1 when it
// could not be started; its output is appended to `log_path` (empty: inherited).
#pragma once

#include <functional>
#include <string>
#include <vector>

namespace egg {

int RunProcess(const std::vector<std::string>& argv, const std::vector<std::string>& env, const std::string& log_path);

// Runs a helper program to completion, calling `on_line` with each line it writes on stdout (without the
// newline) as it comes; its stderr is inherited. The helper is killed when egg dies. Returns its exit status,
// or -1 when it could not be started or was killed. An exception from `on_line` kills the helper and
// propagates.
int RunProcessLines(const std::vector<std::string>& argv, const std::vector<std::string>& env,
                    const std::function<void(const std::string&)>& on_line);

}  // namespace egg

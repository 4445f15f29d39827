// Runs a helper program to completion (egg bench's report generator). Returns its exit status, or -1 when it
// could not be started; its output is appended to `log_path` (empty: inherited).
#pragma once

#include <string>
#include <vector>

namespace egg {

int RunProcess(const std::vector<std::string>& argv, const std::vector<std::string>& env, const std::string& log_path);

}  // namespace egg

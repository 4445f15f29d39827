// Process environment: where egg lives, which Python runs the worker, and the secret-free environment a
// worker is started with. Pure functions over an explicit variable map so they are testable.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace egg {

using EnvMap = std::map<std::string, std::string>;

EnvMap CurrentEnvironment();
std::optional<std::string> LookupEnv(const EnvMap& env, const std::string& name);

// The repository root: $EGG_ROOT (set by the ./egg wrapper) or the source dir compiled in.
std::string EggRoot(const EnvMap& env);
// $EGG_HOME or ~/.cache/egg.
std::string EggHome(const EnvMap& env);
// flag > $EGG_PYTHON > <root>/.venv/bin/python > python3.
std::string WorkerPython(const EnvMap& env, const std::string& flag_value);

// True for variable names that may hold credentials (API keys, tokens, passwords).
bool IsSecretName(const std::string& name);
// The environment for a worker: an allowlist of the parent's variables, minus anything secret-looking or
// carrying a secret's value, plus `extra` (which wins). Returns "NAME=value" strings.
std::vector<std::string> WorkerEnvironment(const EnvMap& parent, const EnvMap& extra);

}  // namespace egg

#include "common/environment.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <string_view>

#include "common/fs.h"

extern char** environ;

namespace egg {
namespace {

constexpr std::array<std::string_view, 14> kAllowedNames = {"PATH",           "HOME",
                                                            "USER",           "LOGNAME",
                                                            "LANG",           "TZ",
                                                            "TMPDIR",         "LD_LIBRARY_PATH",
                                                            "CUDA_HOME",      "CUDA_PATH",
                                                            "XDG_CACHE_HOME", "OMP_NUM_THREADS",
                                                            "VIRTUAL_ENV",    "PYTHONHASHSEED"};
constexpr std::array<std::string_view, 13> kAllowedPrefixes = {
    "LC_",   "TRITON_",  "TORCH_", "TORCHINDUCTOR_", "PYTORCH_",    "NVIDIA_", "CUDA_",
    "NCCL_", "NVSHMEM_", "MKL_",   "OPENBLAS_",      "EGG_WORKER_", "CUBLAS_"};
constexpr std::array<std::string_view, 7> kSecretMarkers = {"KEY",  "TOKEN",      "SECRET", "PASSWORD",
                                                            "AUTH", "CREDENTIAL", "COOKIE"};
constexpr size_t kMinSecretValueLength = 8;

bool StartsWith(std::string_view text, std::string_view prefix) {
  return text.substr(0, prefix.size()) == prefix;
}

bool IsAllowedName(const std::string& name) {
  if (std::find(kAllowedNames.begin(), kAllowedNames.end(), name) != kAllowedNames.end()) {
    return true;
  }
  return std::any_of(kAllowedPrefixes.begin(), kAllowedPrefixes.end(),
                     [&](std::string_view prefix) { return StartsWith(name, prefix); });
}

}  // namespace

EnvMap CurrentEnvironment() {
  EnvMap env;
  for (char** entry = environ; entry != nullptr && *entry != nullptr; ++entry) {
    std::string_view text(*entry);
    const auto equals = text.find('=');
    if (equals != std::string_view::npos) {
      env.emplace(std::string(text.substr(0, equals)), std::string(text.substr(equals + 1)));
    }
  }
  return env;
}

std::optional<std::string> LookupEnv(const EnvMap& env, const std::string& name) {
  auto found = env.find(name);
  if (found == env.end() || found->second.empty()) {
    return std::nullopt;
  }
  return found->second;
}

std::string EggRoot(const EnvMap& env) { return LookupEnv(env, "EGG_ROOT").value_or(EGG_SOURCE_DIR); }

std::string EggHome(const EnvMap& env) {
  if (auto home = LookupEnv(env, "EGG_HOME")) {
    return *home;
  }
  return LookupEnv(env, "HOME").value_or("/tmp") + "/.cache/egg";
}

std::string WorkerPython(const EnvMap& env, const std::string& flag_value) {
  if (!flag_value.empty()) {
    return flag_value;
  }
  if (auto python = LookupEnv(env, "EGG_PYTHON")) {
    return *python;
  }
  const std::string venv_python = EggRoot(env) + "/.venv/bin/python";
  if (FileExists(venv_python)) {
    return venv_python;
  }
  return "python3";
}

bool IsSecretName(const std::string& name) {
  std::string upper(name);
  std::transform(upper.begin(), upper.end(), upper.begin(),
                 [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  return std::any_of(kSecretMarkers.begin(), kSecretMarkers.end(),
                     [&](std::string_view marker) { return upper.find(marker) != std::string::npos; });
}

std::vector<std::string> WorkerEnvironment(const EnvMap& parent, const EnvMap& extra) {
  std::vector<std::string> secret_values;
  for (const auto& [name, value] : parent) {
    if (IsSecretName(name) && value.size() >= kMinSecretValueLength) {
      secret_values.push_back(value);
    }
  }
  auto carries_secret = [&](const std::string& value) {
    return std::any_of(secret_values.begin(), secret_values.end(),
                       [&](const std::string& secret) { return value.find(secret) != std::string::npos; });
  };
  EnvMap chosen;
  for (const auto& [name, value] : parent) {
    if (IsAllowedName(name) && !IsSecretName(name) && !carries_secret(value)) {
      chosen[name] = value;
    }
  }
  for (const auto& [name, value] : extra) {
    chosen[name] = value;
  }
  std::vector<std::string> result;
  result.reserve(chosen.size());
  for (const auto& [name, value] : chosen) {
    result.push_back(name + "=" + value);
  }
  return result;
}

}  // namespace egg

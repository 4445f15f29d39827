#include "harness/sandbox.h"

#include <algorithm>
#include <array>
#include <filesystem>
#include <sstream>
#include <string_view>

#include "common/fs.h"
#include "common/hash.h"

namespace egg::harness {
namespace {

// Mounted read-only where they exist; everything else of the host (/home, /root, /tmp, /run, /mnt, /var ...)
// is absent inside.
constexpr std::array<std::string_view, 4> kSystemFolders = {"/usr", "/etc", "/opt", "/sys"};
// Top-level entries that are symlinks into /usr on merged-/usr systems and folders elsewhere.
constexpr std::array<std::string_view, 6> kRootEntries = {"/bin",   "/sbin",  "/lib",
                                                          "/lib32", "/lib64", "/libx32"};
// NVIDIA files that a GPU host may hold outside /usr (the driver's libraries come from ldconfig).
constexpr std::array<std::string_view, 2> kNvidiaFolders = {"/usr/local/nvidia", "/run/nvidia-persistenced"};
constexpr size_t kStagedHashChars = 16;
constexpr int kBwrapSignalBase = 128;
constexpr int kMaxSignal = 64;

bool IsUnder(std::string_view path, std::string_view folder) {
  if (folder == "/") {
    return true;
  }
  return path == folder || (path.size() > folder.size() && path.substr(0, folder.size()) == folder &&
                            path[folder.size()] == '/');
}

bool IsUnderAny(const std::string& path, const std::vector<std::string>& folders) {
  return std::any_of(folders.begin(), folders.end(),
                     [&](const std::string& folder) { return IsUnder(path, folder); });
}

std::string Join(const std::vector<std::string>& parts, char separator) {
  std::string joined;
  for (const std::string& part : parts) {
    joined += (joined.empty() ? "" : std::string(1, separator)) + part;
  }
  return joined;
}

// One mount of the sandbox, applied in order of destination so that a folder is mounted before what lies in
// it.
struct Mount {
  std::string destination;
  std::vector<std::string> arguments;
};

class MountPlan {
 public:
  void Add(const std::string& destination, std::vector<std::string> arguments) {
    mounts_.push_back({destination, std::move(arguments)});
  }
  void ReadOnly(const std::string& path) { Add(path, {"--ro-bind", path, path}); }
  void Writable(const std::string& source, const std::string& destination) {
    Add(destination, {"--bind", source, destination});
  }
  // Read-only afterwards: remounts come once every mount point below has been created.
  void Hide(const std::string& path, bool is_folder) {
    if (is_folder) {
      Add(path, {"--tmpfs", path});
      remounts_.push_back(path);
    } else {
      Add(path, {"--ro-bind", "/dev/null", path});
    }
  }
  std::vector<std::string> Arguments() {
    std::stable_sort(mounts_.begin(), mounts_.end(),
                     [](const Mount& a, const Mount& b) { return a.destination < b.destination; });
    std::vector<std::string> arguments;
    for (const Mount& mount : mounts_) {
      arguments.insert(arguments.end(), mount.arguments.begin(), mount.arguments.end());
    }
    for (const std::string& path : remounts_) {
      arguments.insert(arguments.end(), {"--remount-ro", path});
    }
    return arguments;
  }

 private:
  std::vector<Mount> mounts_;
  std::vector<std::string> remounts_;
};

// The host's system folders as they are mounted: returns the folders bound read-only.
std::vector<std::string> AddSystem(const HostView& host, MountPlan* plan) {
  std::vector<std::string> bound;
  for (std::string_view folder : kSystemFolders) {
    if (host.IsDirectory(std::string(folder))) {
      plan->ReadOnly(std::string(folder));
      bound.emplace_back(folder);
    }
  }
  for (std::string_view entry : kRootEntries) {
    const std::string path(entry);
    if (auto target = host.SymlinkTarget(path)) {
      plan->Add(path, {"--symlink", *target, path});
    } else if (host.IsDirectory(path)) {
      plan->ReadOnly(path);
      bound.push_back(path);
    }
  }
  plan->Add("/proc", {"--proc", "/proc"});
  plan->Add("/dev", {"--dev", "/dev"});
  return bound;
}

// `path` with a leading root entry that is a symlink (/lib -> usr/lib on merged-/usr systems) replaced by its
// target: inside the sandbox that entry is the same symlink, so binding through it would mount onto a folder
// that does not exist yet (ldconfig on Ubuntu 24.04 names libcuda under /lib).
std::string ThroughRootLinks(const HostView& host, const std::string& path) {
  for (std::string_view entry : kRootEntries) {
    if (!IsUnder(path, entry)) {
      continue;
    }
    if (auto target = host.SymlinkTarget(std::string(entry))) {
      const std::string base = target->empty() || (*target)[0] != '/' ? "/" + *target : *target;
      return std::filesystem::path(base + path.substr(entry.size())).lexically_normal().string();
    }
  }
  return path;
}

void AddGpu(const HostView& host, const std::vector<std::string>& bound, MountPlan* plan) {
  for (const std::string& name : host.ListDirectory("/dev")) {
    if (name.rfind("nvidia", 0) == 0) {
      plan->Add("/dev/" + name, {"--dev-bind", "/dev/" + name, "/dev/" + name});
    }
  }
  std::vector<std::string> folders = LibcudaDirectories(host.LdconfigCache());
  folders.insert(folders.end(), kNvidiaFolders.begin(), kNvidiaFolders.end());
  std::vector<std::string> added;
  for (std::string& folder : folders) {
    folder = ThroughRootLinks(host, folder);
    if (!IsUnderAny(folder, bound) && !IsUnderAny(folder, added) && host.IsDirectory(folder)) {
      plan->ReadOnly(folder);
      added.push_back(folder);
    }
  }
}

// The readable folders not already visible (or visible but inside a hidden one), parents first, none twice.
std::vector<std::string> NewReadable(const std::vector<std::string>& readable,
                                     const std::vector<std::string>& bound,
                                     const std::vector<std::string>& hidden) {
  std::vector<std::string> sorted = readable;
  std::sort(sorted.begin(), sorted.end());
  std::vector<std::string> chosen;
  for (const std::string& path : sorted) {
    const bool visible = IsUnderAny(path, bound) && !IsUnderAny(path, hidden);
    if (!visible && !IsUnderAny(path, chosen)) {
      chosen.push_back(path);
    }
  }
  return chosen;
}

}  // namespace

std::vector<std::string> BwrapArguments(const SandboxSpec& spec, const HostView& host) {
  std::vector<std::string> arguments = {spec.bwrap,      "--die-with-parent", "--new-session",
                                        "--unshare-all", "--cap-drop",        "ALL"};
  MountPlan plan;
  std::vector<std::string> bound = AddSystem(host, &plan);
  if (spec.gpu) {
    AddGpu(host, bound, &plan);
  }
  plan.Writable(spec.scratch + "/tmp", "/tmp");
  plan.Writable(spec.scratch + "/shm", "/dev/shm");
  std::vector<std::string> wanted;
  for (const std::string& path : spec.readable) {
    wanted.push_back(ThroughRootLinks(host, path));
  }
  const std::vector<std::string> readable = NewReadable(wanted, bound, spec.hidden);
  for (const std::string& path : readable) {
    plan.ReadOnly(path);
  }
  std::vector<std::string> visible = bound;
  visible.insert(visible.end(), readable.begin(), readable.end());
  for (const std::string& path : spec.hidden) {
    if (IsUnderAny(path, visible)) {
      plan.Hide(path, host.IsDirectory(path));
    }
  }
  for (const std::string& path : spec.writable) {
    plan.Writable(path, path);
  }
  plan.Writable(spec.scratch, spec.scratch);
  plan.Writable(spec.cache, spec.cache);
  plan.ReadOnly(spec.inbox);
  const std::vector<std::string> mounts = plan.Arguments();
  arguments.insert(arguments.end(), mounts.begin(), mounts.end());
  arguments.insert(arguments.end(), {"--remount-ro", "/", "--chdir", spec.workdir, "--"});
  return arguments;
}

EnvMap SandboxEnvironment(const SandboxSpec& spec) {
  std::vector<std::string> writable = {spec.scratch, spec.cache};
  writable.insert(writable.end(), spec.writable.begin(), spec.writable.end());
  std::vector<std::string> readable = spec.readable;
  readable.push_back(spec.inbox);
  return {{"HOME", spec.scratch + "/home"},
          {"TMPDIR", spec.scratch + "/tmp"},
          {"XDG_CACHE_HOME", spec.scratch + "/home/.cache"},
          {"TRITON_CACHE_DIR", spec.cache + "/triton"},
          {"TORCHINDUCTOR_CACHE_DIR", spec.cache + "/inductor"},
          {"PYTHONDONTWRITEBYTECODE", "1"},
          {"PYTHONNOUSERSITE", "1"},
          {"EGG_SANDBOX_WRITABLE", Join(writable, ':')},
          {"EGG_SANDBOX_READABLE", Join(readable, ':')},
          {"EGG_SANDBOX_HIDDEN", Join(spec.hidden, ':')}};
}

std::vector<std::string> LibcudaDirectories(const std::string& ldconfig_output) {
  std::vector<std::string> folders;
  std::istringstream lines(ldconfig_output);
  std::string line;
  while (std::getline(lines, line)) {
    const auto arrow = line.find("=> ");
    if (line.find("libcuda.so") == std::string::npos || arrow == std::string::npos) {
      continue;
    }
    const std::string folder = std::filesystem::path(line.substr(arrow + 3)).parent_path().string();
    if (!folder.empty() && std::find(folders.begin(), folders.end(), folder) == folders.end()) {
      folders.push_back(folder);
    }
  }
  return folders;
}

std::vector<std::string> PythonReadablePaths(const Json& paths, const std::string& home,
                                             const HostView& host) {
  std::vector<std::string> folders;
  if (!paths.is_array()) {
    return folders;
  }
  for (const Json& entry : paths) {
    if (!entry.is_string()) {
      continue;
    }
    std::string path = std::filesystem::path(entry.get<std::string>()).lexically_normal().string();
    if (path.size() > 1 && path.back() == '/') {
      path.pop_back();
    }
    const bool usable = !path.empty() && path[0] == '/' && path != "/" && !IsUnder(home, path);
    if (usable && host.IsDirectory(path) &&
        std::find(folders.begin(), folders.end(), path) == folders.end()) {
      folders.push_back(path);
    }
  }
  return folders;
}

namespace {

std::string StageFile(const std::string& path, const std::string& inbox) {
  if (!FileExists(path)) {
    return path;
  }
  const std::string name =
      FileSha256Hex(path).substr(0, kStagedHashChars) + "-" + std::filesystem::path(path).filename().string();
  const std::string staged = inbox + "/" + name;
  if (!FileExists(staged)) {
    WriteFileAtomic(staged, ReadFile(path));
  }
  return staged;
}

}  // namespace

void StageRequestFiles(Json* request, const std::string& inbox) {
  for (const char* field : {"task", "candidate"}) {
    if (request->contains(field) && (*request)[field].is_string()) {
      (*request)[field] = StageFile((*request)[field].get<std::string>(), inbox);
    }
  }
  if (request->contains("candidates") && (*request)["candidates"].is_array()) {
    for (Json& path : (*request)["candidates"]) {
      if (path.is_string()) {
        path = StageFile(path.get<std::string>(), inbox);
      }
    }
  }
}

std::optional<int> SignalFromBwrapExit(int exit_code) {
  if (exit_code > kBwrapSignalBase && exit_code <= kBwrapSignalBase + kMaxSignal) {
    return exit_code - kBwrapSignalBase;
  }
  return std::nullopt;
}

}  // namespace egg::harness

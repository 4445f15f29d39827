// The host side of the sandbox: reading the machine, and preparing and trying a sandbox before a worker
// starts.
#include <fcntl.h>
#include <pwd.h>
#include <sys/file.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <sstream>

#include "common/fs.h"
#include "common/process.h"
#include "harness/sandbox.h"

namespace egg::harness {
namespace {

namespace fs = std::filesystem;

// Prints the prefixes and sys.path entries, as given and resolved, to the file named by argv[1].
constexpr const char* kPythonPathsCode =
    "import json, os, sys\n"
    "paths = [sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix] + sys.path\n"
    "paths += [os.path.dirname(os.path.dirname(sys.executable))]\n"
    "json.dump(paths + [os.path.realpath(p) for p in paths if p], open(sys.argv[1], 'w'))\n";
constexpr std::array<const char*, 2> kLdconfigCommands = {"/sbin/ldconfig -p 2>/dev/null",
                                                          "ldconfig -p 2>/dev/null"};
// Files of /etc only root can read: hidden from a worker that runs as root.
constexpr std::array<const char*, 3> kRootOnlyEtc = {"/etc/shadow", "/etc/gshadow", "/etc/ssh"};
constexpr size_t kPipeChunkBytes = 4096;
constexpr const char* kLockName = "lock";
constexpr mode_t kLockMode = 0600;

class RealHostView : public HostView {
 public:
  bool IsDirectory(const std::string& path) const override {
    std::error_code error;
    return fs::is_directory(path, error);
  }
  std::optional<std::string> SymlinkTarget(const std::string& path) const override {
    std::error_code error;
    if (!fs::is_symlink(path, error)) {
      return std::nullopt;
    }
    const fs::path target = fs::read_symlink(path, error);
    return error ? std::nullopt : std::optional<std::string>(target.string());
  }
  std::vector<std::string> ListDirectory(const std::string& path) const override {
    std::vector<std::string> names;
    std::error_code error;
    for (const auto& entry : fs::directory_iterator(path, error)) {
      names.push_back(entry.path().filename().string());
    }
    return names;
  }
  std::string LdconfigCache() const override {
    for (const char* command : kLdconfigCommands) {
      std::unique_ptr<FILE, int (*)(FILE*)> pipe(popen(command, "r"), pclose);
      if (!pipe) {
        continue;
      }
      std::string output;
      std::array<char, kPipeChunkBytes> chunk{};
      size_t read = 0;
      while ((read = fread(chunk.data(), 1, chunk.size(), pipe.get())) > 0) {
        output.append(chunk.data(), read);
      }
      if (!output.empty()) {
        return output;
      }
    }
    return "";
  }
};

std::string LastLine(const std::string& path) {
  std::string text;
  try {
    text = ReadFile(path);
  } catch (const std::exception&) {
    return "";
  }
  std::istringstream lines(text);
  std::string line;
  std::string last;
  while (std::getline(lines, line)) {
    if (line.find_first_not_of(" \t\r") != std::string::npos) {
      last = line;
    }
  }
  return last;
}

// Takes the folder's lock file: true when no live egg process holds it. The descriptor stays open (and
// locked) for the life of the process when `keep`; an flock is released by the kernel when its holder dies.
bool LockFolder(const std::string& folder, bool keep) {
  const int fd = open((folder + "/" + kLockName).c_str(), O_RDWR | O_CREAT | O_CLOEXEC, kLockMode);
  if (fd < 0) {
    return false;
  }
  const bool locked = flock(fd, LOCK_EX | LOCK_NB) == 0;
  if (!keep || !locked) {
    close(fd);
  }
  return locked;
}

// Folders whose egg process is gone (a crash or SIGKILL left them behind), in any PID namespace.
void RemoveStaleFolders(const std::string& sandboxes) {
  std::error_code error;
  for (const auto& entry : fs::directory_iterator(sandboxes, error)) {
    const std::string name = entry.path().filename().string();
    if (name != "cache" && entry.is_directory(error) && LockFolder(entry.path().string(), /*keep=*/false)) {
      fs::remove_all(entry.path(), error);
    }
  }
}

std::string NewSandboxFolder(const std::string& egg_home) {
  static std::atomic<int> counter{0};
  const std::string sandboxes = egg_home + "/sandbox";
  CreateDirectories(sandboxes);
  RemoveStaleFolders(sandboxes);
  const std::string folder = sandboxes + "/" + std::to_string(getpid()) + "-" + std::to_string(counter++);
  CreateDirectories(folder);
  LockFolder(folder, /*keep=*/true);
  return folder;
}

std::optional<std::string> FindBwrap(const std::string& requested, std::string* problem) {
  if (!requested.empty()) {
    if (auto found = FindExecutable(requested)) {
      return found;
    }
    *problem = "the bwrap named by --bwrap or EGG_BWRAP is not an executable file: " + requested;
    return std::nullopt;
  }
  if (auto found = FindExecutable("bwrap")) {
    return found;
  }
  *problem = "bubblewrap is not installed (no bwrap on PATH; apt-get install bubblewrap, or set EGG_BWRAP)";
  return std::nullopt;
}

std::optional<std::vector<std::string>> AskPythonPaths(const SandboxSetup& setup, const std::string& folder,
                                                       std::string* problem) {
  const std::string out = folder + "/python-paths.json";
  const std::string log = folder + "/python-paths.log";
  const int status = RunProcess({setup.python, "-c", kPythonPathsCode, out}, setup.env, log);
  if (status != 0 || !FileExists(out)) {
    const std::string why = LastLine(log);
    *problem = "the worker's Python (" + setup.python + ") could not list its paths" +
               (why.empty() ? "" : ": " + why);
    return std::nullopt;
  }
  const Json paths = Json::parse(ReadFile(out), nullptr, /*allow_exceptions=*/false);
  return PythonReadablePaths(paths, setup.home, RealHost());
}

SandboxSpec BuildSpec(const SandboxSetup& setup, const std::string& bwrap, const std::string& folder,
                      std::vector<std::string> python_paths) {
  SandboxSpec spec;
  spec.bwrap = bwrap;
  spec.scratch = folder + "/scratch";
  spec.inbox = folder + "/inbox";
  spec.cache = setup.egg_home + "/sandbox/cache";
  spec.readable = std::move(python_paths);
  spec.readable.push_back(setup.root);
  spec.writable = setup.writable;
  spec.hidden = {setup.home};
  if (const passwd* user = getpwuid(getuid());
      user != nullptr && user->pw_dir != nullptr && user->pw_dir != setup.home) {
    spec.hidden.emplace_back(user->pw_dir);  // the account's home, when $HOME names another
  }
  if (getuid() == 0) {
    spec.hidden.insert(spec.hidden.end(), kRootOnlyEtc.begin(), kRootOnlyEtc.end());
  }
  // bwrap cannot hide what is not there (it would create a mount point in a read-only /etc)
  std::erase_if(spec.hidden, [](const std::string& path) {
    std::error_code error;
    return !fs::exists(fs::symlink_status(path, error));
  });
  spec.workdir = setup.root;
  spec.gpu = setup.gpu;
  return spec;
}

void CreateSandboxFolders(const SandboxSpec& spec) {
  ResetScratch(spec);
  for (const char* sub : {"/triton", "/inductor"}) {
    CreateDirectories(spec.cache + sub);
  }
  CreateDirectories(spec.inbox);
}

// Starts the worker's interpreter once in the sandbox; "" when it ran, else the cause.
std::string TrySandbox(const SandboxSpec& spec, const SandboxSetup& setup, const std::string& folder) {
  std::vector<std::string> command = BwrapArguments(spec, RealHost());
  command.insert(command.end(), {setup.python, "-c", "pass"});
  const std::string log = folder + "/trial.log";
  const int status = RunProcess(command, setup.env, log);
  if (status == 0) {
    return "";
  }
  const std::string why = LastLine(log);
  return "bwrap (" + spec.bwrap +
         ") cannot start a sandbox here: " + (why.empty() ? "exit status " + std::to_string(status) : why);
}

}  // namespace

const HostView& RealHost() {
  static const RealHostView host;
  return host;
}

PreparedSandbox PrepareSandbox(const SandboxSetup& setup) {
  PreparedSandbox prepared;
  const auto bwrap = FindBwrap(setup.bwrap, &prepared.problem);
  if (!bwrap) {
    return prepared;
  }
  const std::string folder = NewSandboxFolder(setup.egg_home);
  auto python_paths = AskPythonPaths(setup, folder, &prepared.problem);
  if (python_paths) {
    SandboxSpec spec = BuildSpec(setup, *bwrap, folder, std::move(*python_paths));
    CreateSandboxFolders(spec);
    prepared.problem = TrySandbox(spec, setup, folder);
    if (prepared.problem.empty()) {
      prepared.spec = std::move(spec);
      return prepared;
    }
  }
  std::error_code error;
  fs::remove_all(folder, error);
  return prepared;
}

void ResetScratch(const SandboxSpec& spec) {
  std::error_code error;
  fs::remove_all(spec.scratch, error);
  for (const char* sub : {"/home", "/tmp", "/shm"}) {
    CreateDirectories(spec.scratch + sub);
  }
}

void RemoveSandboxFolders(const SandboxSpec& spec) {
  std::error_code error;
  fs::remove_all(fs::path(spec.scratch).parent_path(), error);
}

}  // namespace egg::harness

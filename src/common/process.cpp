#include "common/process.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <deque>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>

namespace egg {
namespace {

// The parent of process `pid` from /proc/<pid>/stat (after the command name, which may hold spaces), or -1.
pid_t ParentOf(const std::string& pid) {
  std::ifstream stat("/proc/" + pid + "/stat");
  std::string text;
  std::getline(stat, text);
  const auto name_end = text.rfind(')');
  if (name_end == std::string::npos) {
    return -1;
  }
  std::istringstream fields(text.substr(name_end + 1));
  std::string state;
  pid_t parent = -1;
  fields >> state >> parent;
  return parent;
}

uint64_t AnonBytes(pid_t pid) {
  std::ifstream statm("/proc/" + std::to_string(pid) + "/statm");
  uint64_t size_pages = 0;
  uint64_t resident_pages = 0;
  uint64_t shared_pages = 0;
  if (!(statm >> size_pages >> resident_pages >> shared_pages) || shared_pages > resident_pages) {
    return 0;
  }
  return (resident_pages - shared_pages) * static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
}

constexpr int kExecFailed = 127;

std::vector<char*> CStrings(const std::vector<std::string>& strings) {
  std::vector<char*> pointers;
  for (const std::string& text : strings) {
    pointers.push_back(const_cast<char*>(text.c_str()));
  }
  pointers.push_back(nullptr);
  return pointers;
}

int WaitFor(pid_t pid) {
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

void ReadLines(int fd, const std::function<void(const std::string&)>& on_line) {
  const std::unique_ptr<FILE, int (*)(FILE*)> stream(fdopen(fd, "r"), &std::fclose);
  std::string line;
  for (int c = std::fgetc(stream.get()); c != EOF; c = std::fgetc(stream.get())) {
    if (c == '\n') {
      on_line(line);
      line.clear();
    } else {
      line += static_cast<char>(c);
    }
  }
  if (!line.empty()) {
    on_line(line);
  }
}

}  // namespace

int RunProcess(const std::vector<std::string>& argv, const std::vector<std::string>& env, const std::string& log_path) {
  if (argv.empty()) {
    return -1;
  }
  std::vector<char*> args;
  for (const std::string& arg : argv) {
    args.push_back(const_cast<char*>(arg.c_str()));
  }
  args.push_back(nullptr);
  std::vector<char*> environment;
  for (const std::string& entry : env) {
    environment.push_back(const_cast<char*>(entry.c_str()));
  }
  environment.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  if (!log_path.empty()) {
    constexpr mode_t kLogMode = 0644;
    posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND,
                                     kLogMode);
    posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
  }
  pid_t pid = 0;
  const int spawned = posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), environment.data());
  posix_spawn_file_actions_destroy(&actions);
  if (spawned != 0) {
    return -1;
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

std::optional<std::string> FindExecutable(const std::string& name_or_path) {
  auto executable = [](const std::string& path) { return access(path.c_str(), X_OK) == 0; };
  if (name_or_path.find('/') != std::string::npos) {
    return executable(name_or_path) ? std::optional<std::string>(name_or_path) : std::nullopt;
  }
  const char* path = getenv("PATH");
  std::istringstream folders(path != nullptr ? path : "/usr/bin:/bin");
  std::string folder;
  while (std::getline(folders, folder, ':')) {
    if (!folder.empty() && executable(folder + "/" + name_or_path)) {
      return folder + "/" + name_or_path;
    }
  }
  return std::nullopt;
}

uint64_t ProcessTreeAnonBytes(pid_t root) {
  std::multimap<pid_t, pid_t> children;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator("/proc", error)) {
    const std::string name = entry.path().filename().string();
    if (name.find_first_not_of("0123456789") == std::string::npos) {
      children.emplace(ParentOf(name), static_cast<pid_t>(std::stol(name)));
    }
  }
  uint64_t total = 0;
  std::deque<pid_t> pending = {root};
  while (!pending.empty()) {
    const pid_t pid = pending.front();
    pending.pop_front();
    total += AnonBytes(pid);
    for (auto [child, end] = children.equal_range(pid); child != end; ++child) {
      pending.push_back(child->second);
    }
  }
  return total;
}

int RunProcessLines(const std::vector<std::string>& argv, const std::vector<std::string>& env,
                    const std::function<void(const std::string&)>& on_line) {
  int pipe_fds[2];
  if (argv.empty() || pipe(pipe_fds) != 0) {
    return -1;
  }
  const std::vector<char*> args = CStrings(argv);
  const std::vector<char*> environment = CStrings(env);
  const pid_t pid = fork();
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    dup2(pipe_fds[1], STDOUT_FILENO);
    close(pipe_fds[0]);
    close(pipe_fds[1]);
    execvpe(args[0], args.data(), environment.data());
    _exit(kExecFailed);
  }
  close(pipe_fds[1]);
  if (pid < 0) {
    close(pipe_fds[0]);
    return -1;
  }
  try {
    ReadLines(pipe_fds[0], on_line);
  } catch (...) {
    kill(pid, SIGKILL);
    WaitFor(pid);
    throw;
  }
  return WaitFor(pid);
}

}  // namespace egg

#include "common/process.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <memory>

namespace egg {
namespace {

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

#include "harness/sandbox.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "common/fs.h"

namespace egg::harness {
namespace {

using ::testing::Contains;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr const char* kLdconfig =
    "1234 libs found in cache `/etc/ld.so.cache'\n"
    "\tlibcudart.so.12 (libc6,x86-64) => /usr/local/cuda/lib64/libcudart.so.12\n"
    "\tlibcuda.so.1 (libc6,x86-64) => /run/nvidia/driver/lib64/libcuda.so.1\n"
    "\tlibcuda.so (libc6,x86-64) => /run/nvidia/driver/lib64/libcuda.so\n"
    "\tlibcuda.so.1 (libc6) => /usr/lib/i386-linux-gnu/libcuda.so.1\n";

// A merged-/usr machine: /bin, /lib ... are symlinks into /usr; the home and the venv are under /home/me.
class FakeHost : public HostView {
 public:
  std::set<std::string> folders = {"/usr",     "/etc",           "/opt",         "/sys",
                                   "/home/me", "/home/me/.venv", "/home/me/egg", "/run/nvidia/driver/lib64",
                                   "/egg-home"};
  std::map<std::string, std::string> links = {
      {"/bin", "usr/bin"}, {"/lib", "usr/lib"}, {"/lib64", "usr/lib64"}, {"/sbin", "usr/sbin"}};
  std::vector<std::string> dev = {"null", "nvidia0", "nvidiactl", "nvidia-uvm", "nvidia-caps", "shm"};
  std::string ldconfig = kLdconfig;

  bool IsDirectory(const std::string& path) const override { return folders.count(path) > 0; }
  std::optional<std::string> SymlinkTarget(const std::string& path) const override {
    auto found = links.find(path);
    return found == links.end() ? std::nullopt : std::optional<std::string>(found->second);
  }
  std::vector<std::string> ListDirectory(const std::string& path) const override {
    return path == "/dev" ? dev : std::vector<std::string>{};
  }
  std::string LdconfigCache() const override { return ldconfig; }
};

SandboxSpec Spec() {
  SandboxSpec spec;
  spec.bwrap = "/usr/bin/bwrap";
  spec.scratch = "/egg-home/sandbox/7-0/scratch";
  spec.inbox = "/egg-home/sandbox/7-0/inbox";
  spec.cache = "/egg-home/sandbox/cache";
  spec.readable = {"/home/me/.venv", "/home/me/egg", "/usr/lib/python3.12", "/home/me/.venv/lib"};
  spec.hidden = {"/home/me"};
  spec.workdir = "/home/me/egg";
  return spec;
}

// Where `sequence` starts among the arguments, or -1.
long Find(const std::vector<std::string>& args, const std::vector<std::string>& sequence) {
  auto found = std::search(args.begin(), args.end(), sequence.begin(), sequence.end());
  return found == args.end() ? -1 : static_cast<long>(found - args.begin());
}

TEST(BwrapArgumentsTest, IsolatesNamespacesAndEndsWithTheSeparator) {
  const auto args = BwrapArguments(Spec(), FakeHost());
  ASSERT_FALSE(args.empty());
  EXPECT_EQ(args.front(), "/usr/bin/bwrap");
  EXPECT_EQ(args.back(), "--");
  for (const char* flag : {"--die-with-parent", "--unshare-all", "--new-session"}) {
    EXPECT_THAT(args, Contains(flag));
  }
  EXPECT_GE(Find(args, {"--cap-drop", "ALL"}), 0);
  EXPECT_GE(Find(args, {"--proc", "/proc"}), 0);
  EXPECT_GE(Find(args, {"--dev", "/dev"}), 0);
  EXPECT_GE(Find(args, {"--chdir", "/home/me/egg", "--"}), 0);
}

TEST(BwrapArgumentsTest, SystemIsReadOnlyAndTheRootLinksStayLinks) {
  const auto args = BwrapArguments(Spec(), FakeHost());
  for (const char* folder : {"/usr", "/etc", "/opt", "/sys"}) {
    EXPECT_GE(Find(args, {"--ro-bind", folder, folder}), 0) << folder;
  }
  EXPECT_GE(Find(args, {"--symlink", "usr/lib", "/lib"}), 0);
  EXPECT_GE(Find(args, {"--symlink", "usr/bin", "/bin"}), 0);
  EXPECT_EQ(Find(args, {"--ro-bind", "/lib32", "/lib32"}), -1) << "absent entries are left out";
  const long root_read_only = Find(args, {"--remount-ro", "/"});
  EXPECT_GT(root_read_only, Find(args, {"--ro-bind", "/usr", "/usr"}));
}

TEST(BwrapArgumentsTest, OnlyTheScratchAndCacheAreWritableAndTheInboxIsReadOnly) {
  const SandboxSpec spec = Spec();
  const auto args = BwrapArguments(spec, FakeHost());
  EXPECT_GE(Find(args, {"--bind", spec.scratch, spec.scratch}), 0);
  EXPECT_GE(Find(args, {"--bind", spec.cache, spec.cache}), 0);
  EXPECT_GE(Find(args, {"--bind", spec.scratch + "/tmp", "/tmp"}), 0);
  EXPECT_GE(Find(args, {"--bind", spec.scratch + "/shm", "/dev/shm"}), 0);
  EXPECT_GE(Find(args, {"--ro-bind", spec.inbox, spec.inbox}), 0);
  const long binds = std::count(args.begin(), args.end(), "--bind");
  EXPECT_EQ(binds, 4) << "scratch, cache, /tmp and /dev/shm";
}

TEST(BwrapArgumentsTest, TheHomeIsAbsentButThePythonEnvironmentInItIsReadable) {
  const auto args = BwrapArguments(Spec(), FakeHost());
  EXPECT_GE(Find(args, {"--ro-bind", "/home/me/.venv", "/home/me/.venv"}), 0);
  EXPECT_GE(Find(args, {"--ro-bind", "/home/me/egg", "/home/me/egg"}), 0);
  EXPECT_THAT(args, Not(Contains("/home/me")));
  EXPECT_EQ(Find(args, {"--ro-bind", "/home/me/.venv/lib", "/home/me/.venv/lib"}), -1)
      << "inside a bound one";
  EXPECT_EQ(Find(args, {"--ro-bind", "/usr/lib/python3.12", "/usr/lib/python3.12"}), -1) << "inside /usr";
}

TEST(BwrapArgumentsTest, AHiddenFolderInsideAVisibleOneIsCoveredAndFoldersComeBeforeWhatTheyHold) {
  SandboxSpec spec = Spec();
  spec.hidden = {"/opt/home/me", "/etc/shadow"};
  spec.readable = {"/opt/home/me/.venv"};
  spec.scratch = "/tmp/egg/scratch";
  FakeHost host;
  host.folders.insert({"/opt/home/me", "/opt/home/me/.venv"});
  const auto args = BwrapArguments(spec, host);
  const long tmpfs = Find(args, {"--tmpfs", "/opt/home/me"});
  ASSERT_GE(tmpfs, 0);
  EXPECT_GT(tmpfs, Find(args, {"--ro-bind", "/opt", "/opt"}));
  EXPECT_GT(Find(args, {"--ro-bind", "/opt/home/me/.venv", "/opt/home/me/.venv"}), tmpfs);
  EXPECT_GT(Find(args, {"--remount-ro", "/opt/home/me"}), Find(args, {"--ro-bind", "/opt/home/me/.venv"}));
  EXPECT_GE(Find(args, {"--ro-bind", "/dev/null", "/etc/shadow"}), 0);
  EXPECT_GT(Find(args, {"--bind", "/tmp/egg/scratch", "/tmp/egg/scratch"}),
            Find(args, {"--bind", "/tmp/egg/scratch/tmp", "/tmp"}));
}

TEST(BwrapArgumentsTest, NvidiaDevicesAndDriverLibrariesPassThroughOnAGpuHostOnly) {
  SandboxSpec spec = Spec();
  const auto cpu = BwrapArguments(spec, FakeHost());
  EXPECT_EQ(Find(cpu, {"--dev-bind", "/dev/nvidia0", "/dev/nvidia0"}), -1);
  spec.gpu = true;
  const auto gpu = BwrapArguments(spec, FakeHost());
  for (const char* device : {"/dev/nvidia0", "/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-caps"}) {
    EXPECT_GE(Find(gpu, {"--dev-bind", device, device}), 0) << device;
  }
  EXPECT_EQ(Find(gpu, {"--dev-bind", "/dev/null", "/dev/null"}), -1);
  EXPECT_GE(Find(gpu, {"--ro-bind", "/run/nvidia/driver/lib64", "/run/nvidia/driver/lib64"}), 0);
  EXPECT_EQ(std::count(gpu.begin(), gpu.end(), "/run/nvidia/driver/lib64"), 2) << "bound once";
  EXPECT_GT(Find(gpu, {"--dev-bind", "/dev/nvidia0"}), Find(gpu, {"--dev", "/dev"}));
}

// Ubuntu 24.04's ldconfig names libcuda under /lib, a symlink to usr/lib: it is visible through /usr already, and
// binding it again onto /lib inside the sandbox failed ("Can't bind mount /oldroot/usr/lib on /newroot/lib").
TEST(BwrapArgumentsTest, DriverFoldersBehindARootSymlinkAreResolvedNotBoundAgain) {
  SandboxSpec spec = Spec();
  spec.gpu = true;
  spec.readable.push_back("/lib/python3.12");
  FakeHost host;
  host.folders.insert({"/lib", "/lib/python3.12"});
  host.links["/lib"] = "usr/lib";
  host.ldconfig = "\tlibcuda.so.1 (libc6,x86-64) => /lib/libcuda.so.1\n";
  const auto args = BwrapArguments(spec, host);
  EXPECT_GE(Find(args, {"--symlink", "usr/lib", "/lib"}), 0);
  EXPECT_EQ(std::count(args.begin(), args.end(), "/lib"), 1) << "only the symlink names /lib";
  EXPECT_EQ(std::count(args.begin(), args.end(), "/usr/lib"), 0) << "/usr/lib is inside the bound /usr";
  EXPECT_EQ(Find(args, {"--ro-bind", "/lib/python3.12"}), -1);
}

TEST(SandboxParsersTest, LibcudaDirectoriesComeFromLdconfig) {
  EXPECT_EQ(LibcudaDirectories(kLdconfig),
            (std::vector<std::string>{"/run/nvidia/driver/lib64", "/usr/lib/i386-linux-gnu"}));
  EXPECT_TRUE(LibcudaDirectories("").empty());
}

TEST(SandboxParsersTest, PythonReadablePathsKeepExistingFoldersButNeverTheHomeOrAnAncestor) {
  const Json paths = {"/home/me/.venv", "", "relative",      "/", "/home", "/home/me", "/home/me/egg/",
                      "/missing",       1,  "/home/me/.venv"};
  EXPECT_EQ(PythonReadablePaths(paths, "/home/me", FakeHost()),
            (std::vector<std::string>{"/home/me/.venv", "/home/me/egg"}));
  EXPECT_TRUE(PythonReadablePaths(Json::object(), "/home/me", FakeHost()).empty());
}

TEST(SandboxEnvironmentTest, WritesGoIntoTheSandboxAndTheHookKnowsTheFolders) {
  const EnvMap env = SandboxEnvironment(Spec());
  EXPECT_EQ(env.at("HOME"), "/egg-home/sandbox/7-0/scratch/home");
  EXPECT_EQ(env.at("TMPDIR"), "/egg-home/sandbox/7-0/scratch/tmp");
  EXPECT_EQ(env.at("TRITON_CACHE_DIR"), "/egg-home/sandbox/cache/triton");
  EXPECT_EQ(env.at("PYTHONDONTWRITEBYTECODE"), "1");
  EXPECT_EQ(env.at("EGG_SANDBOX_WRITABLE"), "/egg-home/sandbox/7-0/scratch:/egg-home/sandbox/cache");
  EXPECT_THAT(env.at("EGG_SANDBOX_READABLE"), HasSubstr("/egg-home/sandbox/7-0/inbox"));
  EXPECT_EQ(env.at("EGG_SANDBOX_HIDDEN"), "/home/me");
}

TEST(SandboxStagingTest, RequestFilesBecomeContentNamedCopiesInTheInbox) {
  const auto folder = std::filesystem::temp_directory_path() / ("egg-stage-test-" + std::to_string(getpid()));
  std::filesystem::create_directories(folder / "inbox");
  std::ofstream(folder / "task.py") << "task";
  std::ofstream(folder / "cand.py") << "candidate";
  Json request = {{"op", "screen"},
                  {"task", (folder / "task.py").string()},
                  {"candidates", {(folder / "cand.py").string(), (folder / "missing.py").string()}}};
  StageRequestFiles(&request, (folder / "inbox").string());
  const std::string task = request["task"];
  EXPECT_EQ(std::filesystem::path(task).parent_path(), folder / "inbox");
  EXPECT_THAT(task, HasSubstr("-task.py"));
  EXPECT_EQ(ReadFile(task), "task");
  EXPECT_EQ(ReadFile(request["candidates"][0]), "candidate");
  EXPECT_EQ(request["candidates"][1], (folder / "missing.py").string());
  Json again = {{"candidate", (folder / "cand.py").string()}};
  StageRequestFiles(&again, (folder / "inbox").string());
  EXPECT_EQ(again["candidate"], request["candidates"][0]);
  std::filesystem::remove_all(folder);
}

TEST(SandboxStagingTest, BwrapExitCodesAbove128AreSignals) {
  EXPECT_EQ(SignalFromBwrapExit(134), 6);
  EXPECT_EQ(SignalFromBwrapExit(137), 9);
  EXPECT_EQ(SignalFromBwrapExit(3), std::nullopt);
  EXPECT_EQ(SignalFromBwrapExit(128), std::nullopt);
}

}  // namespace
}  // namespace egg::harness

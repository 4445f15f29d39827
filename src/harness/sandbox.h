// The bubblewrap sandbox a worker runs candidates in (docs/harness.md, "Sandbox"): the bwrap command line,
// the environment that points the worker's writes into the sandbox, the staging of the files a request names,
// and preparing a sandbox on this host. BwrapArguments and the parsers are pure (the machine comes in through
// a HostView); PrepareSandbox runs processes and returns why a sandbox cannot start instead of throwing.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "common/environment.h"
#include "common/json.h"

namespace egg::harness {

// The folders of one sandbox, as host paths (each is mounted at the same path inside).
struct SandboxSpec {
  std::string bwrap;    // the bubblewrap binary
  std::string scratch;  // writable, one per egg process: HOME, TMPDIR, /tmp and /dev/shm live here
  std::string cache;    // writable, kept across runs: Triton's and Inductor's caches
  std::string inbox;    // read-only inside: staged copies of the task and candidate files
  std::vector<std::string> readable;  // read-only: egg's root, the Python environment
  std::vector<std::string> writable;  // more writable paths (the GPU lock file, a request-trace folder)
  std::vector<std::string> hidden;    // never visible inside; reads there are reported (the real home)
  std::string workdir;                // the worker's working directory
  bool gpu = false;                   // pass the NVIDIA devices and driver libraries through
};

// What the command line needs to know of the machine. RealHost() reads it; tests fake it.
class HostView {
 public:
  virtual ~HostView() = default;
  virtual bool IsDirectory(const std::string& path) const = 0;
  virtual std::optional<std::string> SymlinkTarget(const std::string& path) const = 0;
  virtual std::vector<std::string> ListDirectory(const std::string& path) const = 0;  // entry names
  virtual std::string LdconfigCache() const = 0;  // the output of `ldconfig -p` ("" when unavailable)
};
const HostView& RealHost();

// The bwrap arguments up to and including "--"; the worker's own command line follows.
std::vector<std::string> BwrapArguments(const SandboxSpec& spec, const HostView& host);
// The variables that send the worker's writes into the sandbox (HOME, TMPDIR, caches) and tell its audit hook
// (python/egg_worker/fence.py) which paths are writable, readable and hidden.
EnvMap SandboxEnvironment(const SandboxSpec& spec);

// The folders holding libcuda.so* in `ldconfig -p` output, in order of first appearance.
std::vector<std::string> LibcudaDirectories(const std::string& ldconfig_output);
// The folders a Python environment needs readable, from the JSON list of prefixes and sys.path entries the
// interpreter printed: existing absolute folders, never `home` itself, an ancestor of it, or the root.
std::vector<std::string> PythonReadablePaths(const Json& paths, const std::string& home,
                                             const HostView& host);

// Replaces the file paths a request names (task, candidate, candidates) by read-only copies in `inbox`, named
// by content hash and file name. A missing file is left as named (the worker reports it). Throws IoError.
void StageRequestFiles(Json* request, const std::string& inbox);

// bwrap exits 128 + N when the worker died of signal N: the signal, or nullopt for an ordinary exit code.
std::optional<int> SignalFromBwrapExit(int exit_code);

struct SandboxSetup {
  std::string bwrap;     // flag or $EGG_BWRAP; empty: `bwrap` from PATH
  std::string python;    // the worker's interpreter
  std::string root;      // egg's repository root
  std::string egg_home;  // holds sandbox/<process>/ and sandbox/cache/
  std::string home;      // the real home, hidden inside
  bool gpu = false;
  std::vector<std::string> env;       // the worker's environment (for asking Python its paths)
  std::vector<std::string> writable;  // extra writable paths
};
struct PreparedSandbox {
  std::optional<SandboxSpec> spec;
  std::string problem;  // why there is none: one line naming the cause
};
// Finds bwrap, asks the interpreter for its paths, creates the folders and starts a trial sandbox once.
PreparedSandbox PrepareSandbox(const SandboxSetup& setup);
// Empties the scratch folder: each worker start gets a fresh HOME, TMPDIR, /tmp and /dev/shm. Throws IoError.
void ResetScratch(const SandboxSpec& spec);
// Removes a sandbox's per-process folders (scratch and inbox); the cache stays.
void RemoveSandboxFolders(const SandboxSpec& spec);

}  // namespace egg::harness

"""What a candidate tries beyond the sandbox, as data: an audit hook and a check for processes left behind.

Inside egg's bubblewrap sandbox (src/harness/sandbox.h sets EGG_SANDBOX_WRITABLE, _READABLE and _HIDDEN)
`install()` adds a `sys.addaudithook` that, only while `watching()` is active (the harness runs candidate code),
records:
- an open for writing outside the writable folders (the scratch, the compile caches) and /dev/null, /dev/shm;
- an open for reading under a hidden path (the home directory, root-only files) outside the readable ones, or of
  another process's environment (/proc/<pid>/environ);
- socket.connect / socket.sendto to a network address or to a Unix socket outside the writable folders;
- os.fork, os.forkpty, os.system, os.exec*, os.posix_spawn*, os.spawn*, subprocess.Popen called from code other than
  torch, triton or egg_worker (Triton's compiler subprocesses stay allowed).
bwrap enforces beneath the hook: code that goes through ctypes or C skips it and is still blocked. Without the
sandbox nothing is recorded. `take_violations()` returns the records (one line each) and clears them.

In every worker, `install()` makes the process a child subreaper, so whatever a candidate starts stays its
descendant, setsid and double forks included: `stray_processes(before)` lists the descendants started since
`descendants()` returned `before`, leaving out multiprocessing's forkserver and resource tracker and torch's
compile workers (and theirs); `kill(strays)` ends them.
"""

import contextlib
import ctypes
import os
import signal
import sys
import sysconfig
import threading

PR_SET_CHILD_SUBREAPER = 36
WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_TRUNC
ALWAYS_WRITABLE = ("/dev/null", "/dev/shm")
PROCESS_EVENTS = frozenset(("os.fork", "os.forkpty", "os.system", "os.exec", "os.posix_spawn", "os.spawn",
                            "subprocess.Popen"))
NETWORK_EVENTS = frozenset(("socket.connect", "socket.sendto"))
WATCHED_EVENTS = PROCESS_EVENTS | NETWORK_EVENTS | {"open"}
TRUSTED_MODULES = ("torch", "triton", "egg_worker")
KNOWN_COMMAND_MARKERS = ("torch._inductor.compile_worker", "torch/_inductor/compile_worker")
MAX_VIOLATIONS = 20
SHOWN_STRAYS = 3

_state = threading.local()
_watching = False
_violations = []
_installed = False


def _paths(variable: str) -> tuple:
    return tuple(os.path.normpath(path) for path in os.environ.get(variable, "").split(os.pathsep) if path)


def _under(path: str, folders) -> bool:
    return any(path == folder or path.startswith(folder.rstrip("/") + "/") for folder in folders)


class _Rules:
    def __init__(self):
        self.writable = _paths("EGG_SANDBOX_WRITABLE") + ALWAYS_WRITABLE
        self.readable = _paths("EGG_SANDBOX_READABLE")
        self.hidden = _paths("EGG_SANDBOX_HIDDEN")
        paths = sysconfig.get_paths()
        self.stdlib = tuple({os.path.normpath(paths["stdlib"]), os.path.normpath(paths["platstdlib"])})


_rules = None


def sandboxed() -> bool:
    return bool(os.environ.get("EGG_SANDBOX_WRITABLE"))


def _record(message: str) -> None:
    if len(_violations) < MAX_VIOLATIONS:
        _violations.append(message)


def _path_of(value):
    if isinstance(value, int):
        return None
    try:
        path = os.fsdecode(value)
    except TypeError:
        return None
    return os.path.normpath(os.path.join(os.getcwd(), path))


def _other_environ(path: str) -> bool:
    parts = path.split("/")
    return (len(parts) == 4 and parts[1] == "proc" and parts[3] == "environ"
            and parts[2] not in ("self", "thread-self", str(os.getpid())))


def _judge_open(path_value, flags) -> None:
    path = _path_of(path_value)
    if path is None:
        return
    if isinstance(flags, int) and flags & WRITE_FLAGS:
        if not _under(path, _rules.writable):
            _record(f"opened {path} for writing, outside the sandbox's scratch folder")
    elif _under(path, _rules.hidden) and not _under(path, _rules.readable):
        _record(f"read {path}, which the sandbox hides")
    elif _other_environ(path):
        _record(f"read {path}, another process's environment")


def _judge_network(event: str, args) -> None:
    address = args[1] if len(args) > 1 else None
    if isinstance(address, tuple):
        _record(f"{event} to {address[0]}:{address[1] if len(address) > 1 else ''} (no network in the sandbox)")
    elif isinstance(address, (str, bytes)):
        path = _path_of(address) if address[:1] not in ("\0", b"\0") else None
        if path is None or not _under(path, _rules.writable):
            _record(f"{event} to the Unix socket {os.fsdecode(address)!r} (outside the sandbox's scratch folder)")


def _in_stdlib(filename: str) -> bool:
    if filename.startswith("<frozen"):
        return True
    return _under(filename, _rules.stdlib) and "-packages/" not in filename


def _caller_module():
    """The module of the innermost frame outside the standard library and this file, or None."""
    frame = sys._getframe(1)
    while frame is not None:
        filename = frame.f_code.co_filename
        if filename != __file__ and not _in_stdlib(filename):
            return frame.f_globals.get("__name__", "")
        frame = frame.f_back
    return None


def _judge_process(event: str, args) -> None:
    module = _caller_module()
    if module is not None and module.split(".")[0] in TRUSTED_MODULES:
        return
    shown = " ".join(map(str, args[1])) if event == "subprocess.Popen" and isinstance(args[1], (list, tuple)) \
        else ""
    _record(f"{event}{' ' + shown[:120] if shown else ''} called by {module or 'candidate code'} "
            "(no processes of its own in the sandbox)")


def _hook(event: str, args) -> None:
    if not _watching or event not in WATCHED_EVENTS or getattr(_state, "busy", False):
        return
    _state.busy = True
    try:
        if event == "open":
            _judge_open(args[0], args[2] if len(args) > 2 else None)
        elif event in NETWORK_EVENTS:
            _judge_network(event, args)
        else:
            _judge_process(event, args)
    except Exception as error:  # the hook must never break the code it watches
        _record(f"{event}: the audit hook failed: {type(error).__name__}")
    finally:
        _state.busy = False


def install() -> None:
    """Make this process a child subreaper; inside the sandbox also add the audit hook (once per process)."""
    global _installed, _rules
    if _installed:
        return
    _installed = True
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    except (OSError, AttributeError):
        pass
    if sandboxed():
        _rules = _Rules()
        sys.addaudithook(_hook)


@contextlib.contextmanager
def watching():
    """Judge what runs inside the block as candidate code (nested blocks are fine)."""
    global _watching
    outer = _watching
    _watching = _rules is not None
    try:
        yield
    finally:
        _watching = outer


def take_violations() -> list:
    taken = list(_violations)
    _violations.clear()
    return taken


def describe(violations: list, when: str) -> str:
    more = f" and {len(violations) - 1} more" if len(violations) > 1 else ""
    return f"sandbox: candidate {violations[0]}{more} ({when})"


# ---------------------------------------------------------------- processes left behind

def _process_table() -> dict:
    """{pid: (parent pid, state)} of every process this one can see."""
    table = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as stat:
                fields = stat.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue
        table[int(name)] = (int(fields[1]), fields[0].decode())
    return table


def _subtree(table: dict, root: int) -> set:
    found, pending = set(), [root]
    while pending:
        pid = pending.pop()
        children = [child for child, (parent, _) in table.items() if parent == pid and child not in found]
        found.update(children)
        pending.extend(children)
    return found


def _command(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
            return cmdline.read().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return "?"


def _known_helpers(table: dict, mine: set) -> set:
    """multiprocessing's forkserver and resource tracker, torch's compile workers, and their descendants."""
    helpers = set()
    try:
        from multiprocessing import forkserver, resource_tracker
        helpers.add(getattr(forkserver._forkserver, "_forkserver_pid", None))
        helpers.add(getattr(resource_tracker._resource_tracker, "_pid", None))
    except (ImportError, AttributeError):
        pass
    helpers.update(pid for pid in mine if any(marker in _command(pid) for marker in KNOWN_COMMAND_MARKERS))
    helpers = {pid for pid in helpers if pid in mine}
    for pid in list(helpers):
        helpers |= _subtree(table, pid)
    return helpers


def descendants() -> set:
    return _subtree(_process_table(), os.getpid())


def _reap(pids) -> None:
    for pid in pids:
        try:
            os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            pass


def stray_processes(before: set) -> list:
    """(pid, command) of running descendants started since `before` that are not known helpers; zombies among
    them that are this process's children are reaped."""
    table = _process_table()
    mine = _subtree(table, os.getpid())
    new = mine - before - _known_helpers(table, mine)
    _reap(pid for pid in new if table[pid][1] == "Z" and table[pid][0] == os.getpid())
    return [(pid, _command(pid)) for pid in sorted(new) if table[pid][1] != "Z"]


def kill(strays: list) -> None:
    for pid, _ in strays:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    _reap(pid for pid, _ in strays)


def describe_strays(strays: list) -> str:
    shown = "; ".join(f"pid {pid}: {command[:80]}" for pid, command in strays[:SHOWN_STRAYS])
    return f"candidate left {len(strays)} processes running ({shown}); they were killed"

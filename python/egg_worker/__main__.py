"""`python -m egg_worker`: serve the worker protocol on the original stdin / stdout.

Both are duplicated for the frames; then fd 1 is pointed at fd 2 (whatever a task or candidate prints, Python or C
level, lands on stderr and never corrupts a frame) and fd 0 at /dev/null (nothing else can read a request).
"""

import os
import sys


def main() -> int:
    frames_in = os.fdopen(os.dup(0), "rb")
    frames_out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    null_fd = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null_fd, 0)
    os.close(null_fd)
    sys.stdin = open(os.devnull, encoding="utf-8")
    from egg_worker.server import serve  # imports torch and triton, which may print

    return serve(frames_in, frames_out)


if __name__ == "__main__":
    sys.exit(main())

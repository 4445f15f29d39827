"""egg's Python worker: the only process of egg that imports torch or triton.

It speaks the frame protocol of docs/protocol.md on stdin/stdout (see `server`); `python -m egg_worker` runs it.
"""

HARNESS_VERSION = "1"

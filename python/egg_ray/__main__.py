"""python -m egg_ray JOB.json: the driver of `egg bench --ray`. Events go to stdout, one JSON line each; anything
else that would write to stdout (Ray's own messages) goes to stderr."""
import json
import os
import sys

from .driver import run


def main() -> int:
    events = os.fdopen(os.dup(sys.stdout.fileno()), "w", buffering=1)
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())

    def emit(event: dict) -> None:
        events.write(json.dumps(event) + "\n")

    return run(sys.argv[1], emit)


if __name__ == "__main__":
    sys.exit(main())

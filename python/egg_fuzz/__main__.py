"""python -m egg_fuzz --seeds 0-199 [--out DIR] [--egg-seeds 3]: fuzz the expert backend by hand.

Writes each program, egg's bench output and a copy of every program that was not correct (OUT/failures/),
prints one line per program and a summary table; exit 1 when any program was incorrect, failed or errored.
`--print SEED` shows one program's source without running anything.
"""

import argparse
import pathlib
import sys

from .driver import BAD_VERDICTS, REPO, parse_seeds, run, summary
from .generator import generate


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m egg_fuzz", description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", default="0-19", help="seeds: 0-99, 3,17,40 or a mix")
    parser.add_argument("--print", type=int, metavar="SEED", help="print the program of SEED and exit")
    parser.add_argument("--out", default="egg-fuzz", help="output folder (default egg-fuzz)")
    parser.add_argument("--egg", default=str(REPO / "egg"), help="the egg launcher")
    parser.add_argument("--egg-seeds", type=int, default=3, choices=(1, 2, 3),
                        help="expert seed designs checked per program (default 3: all)")
    parser.add_argument("--tol", type=float, default=1e-4, help="harness tolerance (default 1e-4)")
    parser.add_argument("--trials", type=int, default=2, help="correctness trials on fresh inputs (default 2)")
    parser.add_argument("--ops", default="3-7", help="least and most ops a program draws (default 3-7)")
    parser.add_argument("--batch", type=int, default=50, help="programs per egg bench process (default 50)")
    args = parser.parse_args(argv)
    least, most = (int(n) for n in args.ops.split("-"))
    if args.print is not None:
        print(generate(args.print, least, most).source, end="")
        return 0
    outcomes = run(parse_seeds(args.seeds), pathlib.Path(args.out), pathlib.Path(args.egg), args.egg_seeds,
                   args.tol, args.trials, batch=args.batch, ops=(least, most))
    print(summary(outcomes))
    return 1 if any(o.verdict in BAD_VERDICTS for o in outcomes) else 0


if __name__ == "__main__":
    sys.exit(main())

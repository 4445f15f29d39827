"""python -m egg_report RESULTS.json --out REPORT.html: writes the page; one line on stderr and exit 2 on bad
input."""
import argparse
import sys

from egg_report.page import ReportError, write_report


def main() -> int:
    parser = argparse.ArgumentParser(prog="egg_report", description=__doc__)
    parser.add_argument("results", help="results.json written by egg bench")
    parser.add_argument("--out", required=True, help="the HTML file to write")
    args = parser.parse_args()
    try:
        write_report(args.results, args.out)
    except ReportError as error:
        print(f"egg_report: error: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())

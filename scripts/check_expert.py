#!/usr/bin/env python3
"""The expert compiler's house rules (issue 22), checked on the source text:

- one door: outside src/expert, only "expert/expert.h" is included from the compiler;
- plan/ and design/ include nothing of codegen/ (they ask the kernel families, families/, and its lowering probe);
- every .cpp in src/expert has its own test beside it (`name_test.cpp` for `name.cpp`);
- no file in src/expert over MAX_FILE_LINES lines and no function over MAX_FUNCTION_LINES lines, except the
  ones listed in ALLOWED (each at most its recorded size: the list only shrinks).

    scripts/check_expert.py            # exit 1 with one line per breach
    scripts/check_expert.py --report   # also the largest files and functions

Functions are found by brace counting over the text with comments and literals blanked: a `{` opened at
namespace or class scope after a parameter list starts a function, which ends at its matching `}`.
"""
from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXPERT = ROOT / "src" / "expert"
MAX_FILE_LINES = 600
MAX_FUNCTION_LINES = 80
# Known breaches, with their size when this check was written: the kernel-IR step (issue 22, item 2) removes
# them. A listed entry may shrink, never grow; a new breach fails.
ALLOWED: dict[str, int] = {}
SCOPE_WORDS = re.compile(r"\b(namespace|class|struct|enum|union)\b[^;{()]*$")


def blank(text: str) -> str:
    """Comments and string/char literals replaced by spaces (newlines kept)."""
    pattern = re.compile(r'//[^\n]*|/\*.*?\*/|R"(?P<d>[^(\s]*)\(.*?\)(?P=d)"|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'',
                         re.S)
    return pattern.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), text)


def functions(text: str) -> list[tuple[str, int, int]]:
    """(name, first line, line count) of every function defined at namespace or class scope."""
    code = blank(text)
    found = []
    stack = []  # per open brace: "scope", "function" or "block"
    statement_start = 0
    i = 0
    while i < len(code):
        ch = code[i]
        if ch == "{":
            head = code[statement_start:i]
            inside_function = any(kind != "scope" for kind, _, _ in stack)
            if inside_function:
                stack.append(("block", i, ""))
            elif SCOPE_WORDS.search(" ".join(head.split())) or "(" not in head or head.rstrip().endswith("="):
                stack.append(("scope", i, ""))
            else:
                name = re.findall(r"([~\w:]+)\s*\(", head.split(")")[0] + ")")
                stack.append(("function", i, name[0] if name else "?"))
                start_line = code.count("\n", 0, statement_start + len(head) - len(head.lstrip())) + 1
                stack[-1] = ("function", start_line, stack[-1][2])
            statement_start = i + 1
        elif ch == "}":
            kind, start, name = stack.pop() if stack else ("scope", 0, "")
            if kind == "function":
                end_line = code.count("\n", 0, i) + 1
                found.append((name, start, end_line - start + 1))
            statement_start = i + 1
        elif ch in ";" or (ch == ":" and code[i - 1 : i + 1] != "::" and code[i : i + 2] != "::"
                           and re.search(r"\b(public|private|protected)\s*$", code[statement_start:i])):
            statement_start = i + 1
        i += 1
    return found


def check(report: bool) -> list[str]:
    problems = []
    for path in sorted(ROOT.glob("src/**/*")):
        if path.suffix not in (".h", ".cpp") or EXPERT in path.parents:
            continue
        for line in path.read_text().splitlines():
            m = re.match(r'#include "(expert/[^"]+)"', line)
            if m and m.group(1) != "expert/expert.h":
                problems.append(f"{path.relative_to(ROOT)}: includes {m.group(1)}; outside src/expert only expert/expert.h")
    sizes, lengths = [], []
    for path in sorted(EXPERT.rglob("*")):
        if path.suffix not in (".h", ".cpp"):
            continue
        rel = str(path.relative_to(EXPERT))
        text = path.read_text()
        room = rel.split("/")[0]
        if room in ("plan", "design") and not rel.endswith("_test.cpp"):
            for m in re.finditer(r'#include "expert/codegen/([^"]+)"', text):
                problems.append(f"src/expert/{rel}: includes codegen/{m.group(1)}; {room}/ asks the kernel families "
                                "(families/family.h, families/lowering_probe.h), never codegen/")
        if path.suffix == ".cpp" and not path.stem.endswith("_test") and not path.with_name(f"{path.stem}_test.cpp").exists():
            problems.append(f"src/expert/{rel}: no {path.stem}_test.cpp beside it")
        lines = text.count("\n")
        sizes.append((lines, rel))
        if lines > MAX_FILE_LINES and lines > ALLOWED.get(rel, 0):
            problems.append(f"src/expert/{rel}: {lines} lines (at most {ALLOWED.get(rel, MAX_FILE_LINES)})")
        for name, start, count in functions(text):
            key = f"{rel}:{name}"
            lengths.append((count, key, start))
            if count > MAX_FUNCTION_LINES and count > ALLOWED.get(key, 0):
                problems.append(f"src/expert/{rel}:{start}: {name} is {count} lines "
                                f"(at most {ALLOWED.get(key, MAX_FUNCTION_LINES)})")
    if report:
        print("largest files:", ", ".join(f"{rel} {n}" for n, rel in sorted(sizes, reverse=True)[:8]))
        print("longest functions:", ", ".join(f"{key} {n}" for n, key, _ in sorted(lengths, reverse=True)[:16]))
    return problems


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--report", action="store_true")
    problems = check(parser.parse_args().report)
    for problem in problems:
        print(problem)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())

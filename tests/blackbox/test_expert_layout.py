"""The expert compiler's house rules (scripts/check_expert.py): one door, plan/ and design/ free of codegen/
but for the lowering probe, and the file and function size limits."""
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_expert_layout_rules_hold():
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "check_expert.py")], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_the_check_sees_a_breach(tmp_path):
    sys.path.insert(0, str(ROOT / "scripts"))
    import check_expert

    body = "\n".join(f"  x += {i};" for i in range(90))
    found = check_expert.functions(f"namespace a {{\nint F(int x) {{\n{body}\n  return x;\n}}\nstruct S {{ int y; }};\n}}\n")
    assert found == [("F", 2, 93)]

"""The scripted LLM of bench/h200_hybrid.sh: a loopback OpenAI-compatible server (Python stdlib only, through
tests/blackbox/fake_llm.py) that answers every hybrid Code request from the design record in its prompt: in turn an
illegal move (num_warps 3: refused by the compiler's rules, asked again, answered with the first kernel's num_warps
doubled or halved) and a source edit copied from the incumbent.
Debug requests get the repaired file's own text back (nothing to repair: the candidate stays dropped).

    python3 bench/hybrid_fake_llm.py PORT_FILE      # writes the port to PORT_FILE and serves until killed
"""
import itertools
import json
import pathlib
import re
import sys
import threading

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "tests" / "blackbox"))
import fake_llm as f  # noqa: E402

RECORD = re.compile(r"design record \(move one field of it, or write a source edit\):\n(\{.*?\n\})\n", re.S)
SOURCE = re.compile(r"The incumbent \(the fastest correct kernel so far\):\n```python\n(.*?)\n```", re.S)
_turns = itertools.count()


def code_reply(request):
    prompt = request.last_user_message
    match = RECORD.search(prompt)
    kernels = json.loads(match.group(1))["kernels"] if match else []
    if kernels and request.is_repair:
        warps = kernels[0]["design"].get("num_warps", 4)
        return f.design_move(kernels[0]["name"], "num_warps", warps * 2 if warps < 16 else warps // 2, "more warps")
    if kernels and next(_turns) % 2 == 0:
        return f.design_move(kernels[0]["name"], "num_warps", 3, "an illegal move")
    source = SOURCE.search(prompt)
    return f.code(source.group(1) if source else "relu_ok.py", move="source edit: the incumbent as is")


def debug_reply(request):
    source = re.search(r"```python\n(.*?)\n```", request.last_user_message, re.S)
    return f.fix(source.group(1) if source else "relu_ok.py", diagnosis="scripted: no repair")


def main():
    scenario = f.Scenario(defaults={"code": code_reply, "debug": debug_reply})
    with f.FakeLlm("openai", scenario) as server:
        pathlib.Path(sys.argv[1]).write_text(str(server.port))
        threading.Event().wait()


if __name__ == "__main__":
    main()

# Device diagnostic: how 36_LSTMHn / 37_LSTMCn are captured on CUDA (torch version there), and the output shapes.
import json, sys, torch
sys.path.insert(0, "python")
from egg_worker import capture as cap
for name in ["36_LSTMHn", "37_LSTMCn"]:
    resp = cap.handle_capture({"task": f".kb/level3/{name}.py", "device": "cuda"})
    print("==", name, torch.__version__, resp["status"], resp.get("reason", ""))
    ir = resp.get("graph", {})
    for inp in ir.get("inputs", []):
        print("  input", inp["name"], inp.get("meta", {}).get("shape"))
    for n in ir.get("nodes", []):
        if n["op"].startswith("aten.lstm") or n["op"] == "getitem" or "squeeze" in n["op"] or "view" in n["op"]:
            args = [a if not isinstance(a, list) or len(a) < 6 else f"list[{len(a)}]" for a in n["args"]]
            print("  node", n["name"], n["op"], json.dumps(args)[:300], json.dumps(n.get("meta"))[:400])
    print("  outputs", ir.get("outputs"), ir.get("returns"))
    for n in ir.get("nodes", []):
        if n["op"].startswith("aten.lstm"):
            print("  users:", [m["name"] + ":" + m["op"] for m in ir["nodes"] if json.dumps(m["args"]).find('"' + n["name"] + '"') >= 0])

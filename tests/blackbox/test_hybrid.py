"""Black-box tests of `egg optimize --backend hybrid`: the real binary, the expert compiler's seeds and design
spaces, and a scripted loopback LLM answering with design moves (legal and illegal) and source edits (working and
broken). On the CPU every measured stage runs on the interpreter's wall clock (`cpu-interpreter-wall`: search
decisions only, never performance figures). Task: relu over 8 x 1024 elements, where the number of programs is
what the interpreter's wall clock sees."""
import json

import fake_llm as f

TASK = "task_relu_wide.py"
KERNEL = "egg_k0_relu"
STAGES = ["stage1.seeds", "stage1.algorithm", "stage2.mapping", "stage2.tiling", "stage2.memory"]
SEARCH = ["--device", "cpu", "--seeds", "1", "--rounds", "1", "--candidates-per-round", "1", "--quiet"]


def optimize(egg, server, *extra, out="out", backend="hybrid"):
    llm = ["--provider", "openai", "--base-url", server.base_url, "--model", "fake-model", "--llm-timeout", "5",
           "--llm-concurrency", "1"] if server else ["--cpu-wall-tuning"]
    proc = egg.run("optimize", TASK, "--backend", backend, "--out", out, *SEARCH, *llm, *extra,
                   env={"OPENAI_API_KEY": "sk-hybrid-test"}, timeout=600)
    assert proc.returncode == 0, proc.stderr
    report = json.loads((egg.workdir / out / "report.json").read_text())
    return report, (egg.workdir / out / "trajectory.md").read_text()


def decisions(report, stage=None):
    return [d for s in report["stages"] if stage in (None, s["stage"]) for d in s["decisions"]]


def scripted():
    # stage1.algorithm: an illegal tile (not a power of two), then, asked again with the rule, one program for all
    # 8192 elements; stage2.mapping: a broken source edit (Debug repairs it); stage2.tiling: a working source edit
    return f.Scenario({
        "code:stage1.algorithm": [f.design_move(KERNEL, "xblock", 3000, "fewer programs"),
                                  f.design_move(KERNEL, "xblock", 8192, "one program for all elements")],
        "code:stage2.mapping": [f.code("llm/relu_compile_error.py", move="broken edit")],
        "debug:*": [f.fix("relu_ok.py", diagnosis="tl.undefined_function does not exist")],
        "code:stage2.tiling": [f.code("llm/relu_block1024.py", move="source edit: 1024 per program")],
    })


def test_design_moves_and_source_edits_compete_beside_the_expert(egg):
    with f.FakeLlm("openai", scripted()) as server:
        report, trajectory = optimize(egg, server)
    assert report["status"] == "ok" and report["backend"] == "hybrid"
    assert [s["stage"] for s in report["stages"]] == STAGES
    assert report["timer"] == "cpu-interpreter-wall"
    # the seeds are the expert compiler's, and the LLM was never asked for one
    seeds = report["stages"][0]["candidates"]
    assert seeds and all(c["author"] == "expert" and not c["untrusted"] for c in seeds)
    assert server.count(stage="stage1.seeds") == 0
    # the illegal move went back once with the rule it broke; the legal one was realized by the compiler
    algorithm = server.matching(role="code", stage="stage1.algorithm")
    assert [r.is_repair for r in algorithm] == [False, True]
    assert "illegal design move: DesignFits" in algorithm[1].last_user_message
    assert f'"name": "{KERNEL}"' in algorithm[0].last_user_message, "the prompt holds the design record"
    refused = report["hybrid"]["refused_moves"]
    assert refused and refused[0]["move"]["value"] == 3000 and "DesignFits" in refused[0]["rule"]
    moved = [d for d in decisions(report, "stage1.algorithm") if d["move"] == f"llm: {KERNEL} xblock 8192"]
    assert moved and moved[0]["author"] == "llm" and moved[0]["accepted"], decisions(report, "stage1.algorithm")
    realized = [c for c in report["stages"][1]["candidates"] if c["id"] == moved[0]["candidate_id"]]
    assert realized[0]["untrusted"] is False, "a realized design move is the compiler's source"
    # the broken edit was repaired by the LLM's Debug agent; LLM-written files are untrusted
    mapping = report["stages"][2]["candidates"]
    broken = [c for c in mapping if c["move"] == "broken edit"]
    assert broken[0]["status"] == "compile_error" and broken[0]["untrusted"]
    assert broken[1]["origin"] == "debug" and broken[1]["status"] == "ok" and broken[1]["author"] == "llm"
    # the expert's screening ran in every refinement stage; the single seed was evaluated without a screen
    screened = {s["stage"] for s in report["screened"]}
    assert screened >= {"stage2.tiling", "stage2.memory"} and "stage1.seeds" not in screened
    # provenance per source, with what the LLM cost
    provenance = report["provenance"]
    assert provenance["llm"]["accepted"] >= 1 and provenance["expert"]["accepted"] >= 1
    assert provenance["llm"]["proposed"] >= 3 and provenance["llm"]["correct"] >= 3
    assert provenance["llm"]["calls"] == len(server.requests) and provenance["llm"]["input_tokens"] > 0
    assert all(d["author"] in ("expert", "llm") for d in provenance["accepted"])
    assert "## Provenance" in trajectory and "accepted from llm: stage1.algorithm" in trajectory
    assert "refused LLM design move in stage1.algorithm" in trajectory


def test_a_call_budget_stops_the_llm_and_the_expert_search_finishes(egg):
    scenario = f.Scenario({"code:*": [f.design_move(KERNEL, "num_warps", 3)]})  # illegal, then the budget is spent
    with f.FakeLlm("openai", scenario) as server:
        report, trajectory = optimize(egg, server, "--max-calls", "1")
    assert len(server.requests) == 1
    assert report["status"] == "ok" and report["stopped_because"] == "completed"
    assert "budget_exhausted" in report["hybrid"]["llm_stopped"]
    assert {s["stage"] for s in report["screened"]} >= {"stage2.tiling", "stage2.memory"}
    assert all(s["stopped_because"] != "budget_exhausted" for s in report["stages"])
    assert "the LLM stopped: budget_exhausted" in trajectory


def test_hybrid_is_never_slower_than_expert_on_the_same_budget(egg):
    """Same task, seeds and rounds; interpreter wall-clock times (cpu-interpreter-wall), the acceptance rule."""
    expert, _ = optimize(egg, None, backend="expert", out="expert")
    with f.FakeLlm("openai", scripted()) as server:
        hybrid, _ = optimize(egg, server, out="hybrid")
    assert expert["timer"] == hybrid["timer"] == "cpu-interpreter-wall"
    ours, theirs = hybrid["final"]["time_ms"]["candidate"], expert["final"]["time_ms"]["candidate"]
    noise = max(ours["p80"] - ours["p20"], theirs["p80"] - theirs["p20"], 0.01 * ours["median"])
    assert not theirs["median"] < ours["median"] - noise, (theirs, ours)

import json


def test_pytorch_only_candidate_is_rejected(egg):
    proc, result = egg.eval_json("task_relu.py", "relu_torch_only.py")
    assert proc.returncode == 1
    assert result["status"] == "rejected"
    assert "no Triton kernel" in result["reason"]


def test_syntax_error_is_compile_error(egg):
    proc, result = egg.eval_json("task_relu.py", "relu_syntax_error.py")
    assert proc.returncode == 1
    assert result["status"] == "compile_error"
    assert "SyntaxError" in result["reason"] or "invalid syntax" in result["reason"]


def test_human_output_names_status_and_interpreter(egg):
    proc = egg.run("eval", "task_relu.py", "relu_ok.py", "--device", "cpu")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("status: ok")
    assert "interpreter" in proc.stdout


def test_profile_on_cpu_says_ncu_is_unavailable_and_gives_a_roofline(egg):
    proc = egg.run("profile", "task_relu.py", "relu_ok.py", "--device", "cpu", "--json")
    assert proc.returncode == 0, proc.stderr
    profile = json.loads(proc.stdout)
    assert profile["status"] == "ok"
    assert profile["ncu"]["available"] is False and profile["ncu"]["reason"]
    # ReLU on 8x33 fp32: input and output, 264 elements each, no FLOPs counted by torch
    assert profile["roofline"]["bytes"] == 2 * 8 * 33 * 4
    assert profile["roofline"]["flops"] == 0
    assert profile["roofline"]["time_ms"] is None

"""Black-box tests of `egg optimize --backend llm` against loopback fakes of today's APIs (fake_services.py):
OpenAI reasoning models, a Responses-only model, Claude with 529s and Claude Opus 4.7, local servers that think
inline, have a small context or truncate, a router with errors inside HTTP 200, and a model that does not exist.
One server for the module; each run is one seed on the CPU (one evaluation)."""
import json
import sqlite3

import pytest

import fake_services as fs

SECRET = "sk-egg-services-secret-0123456789"
FAST_RETRIES = '[llm]\nbackoff_initial_s = 0.05\nbackoff_max_s = 0.2\n'


@pytest.fixture(scope="module")
def server():
    with fs.FakeServices() as services:
        yield services


@pytest.fixture(autouse=True)
def fresh(server):
    server.reset()
    server.hold_s = 0.0


def optimize(egg, server, model, *extra, protocol="openai", config=None):
    args = ["optimize", "task_relu.py", "--backend", "llm", "--device", "cpu", "--out", "out",
            "--provider", protocol, "--base-url", server.base_url(protocol), "--model", model,
            "--seeds", "1", "--rounds", "0", "--llm-timeout", "20", *extra]
    if config is not None:
        (egg.workdir / "egg.toml").write_text(config)
        args += ["--config", "egg.toml"]
    key = "ANTHROPIC_API_KEY" if protocol == "anthropic" else "OPENAI_API_KEY"
    return egg.run(*args, env={key: SECRET})


def report(egg):
    return json.loads((egg.workdir / "out" / "report.json").read_text())


def assert_correct_kernel(egg, proc):
    assert proc.returncode == 0, proc.stderr
    rep = report(egg)
    assert rep["status"] == "ok", rep["reason"]
    header, kernel = (egg.workdir / "out" / "model_new.py").read_text().split("\n", 1)
    assert header.startswith("# egg: made and verified for tol ")
    assert kernel == (egg.workdir / "relu_ok.py").read_text()
    return rep


def assert_no_secret_anywhere(egg, proc):
    assert SECRET not in proc.stdout + proc.stderr
    for path in list(egg.home.rglob("*")) + list((egg.workdir / "out").rglob("*")):
        if path.is_file():
            assert SECRET.encode() not in path.read_bytes(), path


def test_gpt_5_1_gets_its_shape_the_seeds_at_once_and_the_bill(egg, server):
    server.hold_s = 0.3
    config = ('[llm]\nreasoning_effort = "high"\nprice_input_per_mtok_usd = 1.25\n'
              'price_cached_input_per_mtok_usd = 0.125\nprice_output_per_mtok_usd = 10.0\n')
    proc = optimize(egg, server, "gpt-5.1", "--seeds", "3", config=config)
    rep = assert_correct_kernel(egg, proc)
    seen = server.seen("gpt-5.1")
    assert all(s.status == 200 for s in seen), [(s.status, s.reply) for s in seen if s.status != 200]
    for s in seen:
        assert "max_tokens" not in s.body and "temperature" not in s.body and "top_p" not in s.body
        assert s.body["max_completion_tokens"] >= 16384 and s.body["reasoning_effort"] == "high"
    assert server.max_in_flight("gpt-5.1") >= 2, "the three seeds are asked for at once"
    usage = [s.reply["usage"] for s in seen]
    llm = rep["llm"]
    assert llm["reasoning_tokens"] == sum(u["completion_tokens_details"]["reasoning_tokens"] for u in usage) > 0
    cached = sum(u["prompt_tokens_details"]["cached_tokens"] for u in usage)
    assert llm["cached_input_tokens"] == cached > 0
    dollars = sum((u["prompt_tokens"] - u["prompt_tokens_details"]["cached_tokens"]) * 1.25 +
                  u["prompt_tokens_details"]["cached_tokens"] * 0.125 + u["completion_tokens"] * 10.0
                  for u in usage) / 1e6
    assert llm["cost_usd"] == pytest.approx(dollars)
    assert "cached input" in (egg.workdir / "out" / "trajectory.md").read_text()


def test_the_code_agent_is_told_the_tasks_precision(egg, server):
    proc = optimize(egg, server, "o4-mini", "--precision", "bf16")
    assert proc.returncode == 0, proc.stderr
    system = [s.body["messages"][0]["content"] for s in server.seen("o4-mini")]
    assert system and all("The task runs in bfloat16 (KernelBench's bf16 mode)" in text for text in system)
    assert "atol = rtol = 0.01" in system[0], "bf16's default tolerance"
    server.reset()
    assert optimize(egg, server, "o4-mini").returncode == 0
    assert "Inputs, parameters and outputs are float32." in server.seen("o4-mini")[0].body["messages"][0]["content"]


def test_o4_mini_gets_max_completion_tokens_and_no_sampling(egg, server):
    proc = optimize(egg, server, "o4-mini")
    assert_correct_kernel(egg, proc)
    seen = server.seen("o4-mini")
    assert seen and all(s.status == 200 for s in seen)
    assert all("max_completion_tokens" in s.body and "temperature" not in s.body and "reasoning_effort" not in s.body
               for s in seen)


def test_a_responses_only_model_moves_to_the_responses_api(egg, server):
    proc = optimize(egg, server, "gpt-5.1-codex-max")
    rep = assert_correct_kernel(egg, proc)
    seen = server.seen("gpt-5.1-codex-max")
    assert [s.path for s in seen][0] == "/v1/chat/completions" and seen[0].status == 404
    assert all(s.path == "/v1/responses" and s.status == 200 for s in seen[1:])
    assert all(s.body["store"] is False and "max_output_tokens" in s.body for s in seen[1:])
    assert any("Responses API" in change for change in rep["llm"]["adaptations"])
    assert rep["llm"]["reasoning_tokens"] > 0


def test_claude_sonnet_4_5_rides_out_529_overloads(egg, server):
    proc = optimize(egg, server, "claude-sonnet-4-5", protocol="anthropic", config=FAST_RETRIES)
    rep = assert_correct_kernel(egg, proc)
    seen = server.seen("claude-sonnet-4-5")
    assert [s.status for s in seen[:3]] == [529, 529, 200]
    assert all(s.body["temperature"] == 0.2 and s.body["max_tokens"] <= 64000 for s in seen)
    assert rep["llm"]["errors"]["server"]["count"] == 2 and "Overloaded" in rep["llm"]["errors"]["server"]["last_message"]
    assert rep["llm"]["cached_input_tokens"] > 0
    assert "failed attempts, server: 2" in (egg.workdir / "out" / "trajectory.md").read_text()
    show = egg.run("show", rep["run_id"])
    assert show.returncode == 0 and "failed attempts, server: 2" in show.stdout


def test_claude_opus_4_7_gets_no_temperature(egg, server):
    proc = optimize(egg, server, "claude-opus-4-7", protocol="anthropic")
    assert_correct_kernel(egg, proc)
    seen = server.seen("claude-opus-4-7")
    assert seen and all(s.status == 200 and "temperature" not in s.body for s in seen)


def test_a_local_model_thinking_inline_in_a_small_context(egg, server):
    proc = optimize(egg, server, "qwq-local")
    rep = assert_correct_kernel(egg, proc)
    seen = server.seen("qwq-local")
    assert seen[0].status == 400 and "maximum context length is 8192" in seen[0].reply["message"]
    assert all(s.status == 200 and s.body["max_tokens"] < 8192 for s in seen[1:])
    assert any("context of 8192" in change for change in rep["llm"]["adaptations"])
    seed = rep["stages"][0]["candidates"][0]
    assert seed["origin"] == "code" and seed["status"] == "ok", "the draft inside <think> was taken"
    assert not [s for s in seen if s.role == "debug"]


def test_a_reply_cut_at_a_small_cap_is_asked_again_with_a_larger_one(egg, server):
    proc = optimize(egg, server, "small-cap-local", config="[llm]\nmax_output_tokens = 100\n")
    rep = assert_correct_kernel(egg, proc)
    seen = server.seen("small-cap-local")
    assert [s.body["max_tokens"] for s in seen[:2]] == [100, 200]
    assert seen[0].reply["choices"][0]["finish_reason"] == "length"
    assert rep["llm"]["errors"]["truncated"]["count"] >= 1


def test_errors_inside_http_200_are_retried(egg, server):
    proc = optimize(egg, server, "router/flaky-model", config=FAST_RETRIES)
    rep = assert_correct_kernel(egg, proc)
    seen = server.seen("router/flaky-model")
    assert [("error" in s.reply) for s in seen[:3]] == [True, True, False]
    assert rep["llm"]["errors"]["server"]["count"] == 2


def test_a_model_that_does_not_exist_stops_the_run_with_the_apis_message(egg, server):
    proc = optimize(egg, server, "gpt-nope", "--seeds", "2")
    assert proc.returncode == 2
    lines = [line for line in proc.stderr.splitlines() if line.startswith("egg: error")]
    assert len(lines) == 1 and "The model `gpt-nope` does not exist" in lines[0], proc.stderr
    assert "Traceback" not in proc.stderr and "no candidate passed" not in proc.stdout + proc.stderr
    rep = report(egg)
    assert rep["stopped_because"] == "llm_config_error" and "does not exist" in rep["reason"]
    assert "does not exist" in (egg.workdir / "out" / "trajectory.md").read_text()
    assert len(server.seen("gpt-nope")) <= 2, "no retries, no later stage asks again"
    with sqlite3.connect(egg.home / "egg.db") as db:
        assert db.execute("SELECT status FROM runs").fetchall() == [("failed",)]


def test_a_key_echoed_in_an_error_body_is_redacted_everywhere(egg, server):
    proc = optimize(egg, server, "leaky-proxy")
    assert proc.returncode == 2
    assert "[redacted]" in proc.stderr
    assert_no_secret_anywhere(egg, proc)

"""Tests of the fake LLM server itself (fake_llm.py), through urllib, for both protocols."""
import http.client
import json
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest
from fake_llm import (FIXTURES, FakeLlm, Scenario, code, fix, hang, http_error, profile, text)

KEY = "sk-fake-test-key-42"


def system_line(role, stage):
    return f"egg-agent: {role} stage={stage}\nYou are the {role} agent."


def post(server, role, stage, user="do it", key=KEY, timeout_s=10, system=None):
    system = system if system is not None else system_line(role, stage)
    if server.protocol == "openai":
        body = {"model": "fake-model", "max_tokens": 100, "temperature": 0.2,
                "messages": [{"role": "system", "content": system}, {"role": "user", "content": user}]}
        headers = {"Content-Type": "application/json", "Authorization": f"Bearer {key}"}
        url = server.base_url + "/chat/completions"
    else:
        body = {"model": "fake-model", "max_tokens": 100, "system": system,
                "messages": [{"role": "user", "content": user}]}
        headers = {"content-type": "application/json", "x-api-key": key, "anthropic-version": "2023-06-01"}
        url = server.base_url + "/v1/messages"
    request = urllib.request.Request(url, json.dumps(body).encode(), headers, method="POST")
    with urllib.request.urlopen(request, timeout=timeout_s) as response:
        return json.loads(response.read())


def reply_text(protocol, reply):
    if protocol == "openai":
        return reply["choices"][0]["message"]["content"]
    return "".join(block["text"] for block in reply["content"])


@pytest.fixture(params=["openai", "anthropic"])
def protocol(request):
    return request.param


def test_openai_reply_shape_and_base_url():
    with FakeLlm("openai", Scenario()) as server:
        assert server.base_url == f"http://127.0.0.1:{server.port}/v1"
        reply = post(server, "code", "stage1.seeds")
    assert reply["object"] == "chat.completion"
    choice = reply["choices"][0]
    assert choice["index"] == 0 and choice["finish_reason"] == "stop"
    assert choice["message"]["role"] == "assistant"
    usage = reply["usage"]
    assert usage["prompt_tokens"] > 0 and usage["completion_tokens"] > 0
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]
    assert usage["completion_tokens"] == len(choice["message"]["content"]) // 4


def test_anthropic_reply_shape_and_base_url():
    with FakeLlm("anthropic", Scenario()) as server:
        assert server.base_url == f"http://127.0.0.1:{server.port}"
        reply = post(server, "profile", "stage2.tiling")
    assert reply["type"] == "message" and reply["role"] == "assistant"
    assert reply["stop_reason"] == "end_turn"
    assert reply["content"][0]["type"] == "text"
    assert reply["usage"]["input_tokens"] > 0 and reply["usage"]["output_tokens"] > 0
    assert json.loads(reply["content"][0]["text"])["bottleneck"] == "memory"


def test_code_reply_holds_json_header_and_the_whole_file(protocol):
    scenario = Scenario({"code:stage1.seeds": [code("llm/relu_block1024.py", description="one program",
                                                     move="BLOCK=1024")]})
    with FakeLlm(protocol, scenario) as server:
        reply = reply_text(protocol, post(server, "code", "stage1.seeds"))
    header = reply.split("```json\n", 1)[1].split("\n```", 1)[0]
    assert json.loads(header) == {"description": "one program", "move": "BLOCK=1024"}
    source = reply.split("```python\n", 1)[1].rsplit("\n```", 1)[0]
    assert source == (FIXTURES / "llm" / "relu_block1024.py").read_text().rstrip("\n")


def test_debug_reply_has_diagnosis():
    with FakeLlm("openai", Scenario()) as server:
        reply = reply_text("openai", post(server, "debug", "stage1.seeds"))
    assert "diagnosis" in json.loads(reply.split("```json\n", 1)[1].split("\n```", 1)[0])
    assert "class ModelNew" in reply


def test_routing_prefers_the_stage_queue_then_wildcard_then_default(protocol):
    scenario = Scenario({"code:stage2.tiling": [text("tiling-1"), text("tiling-2")],
                         "code:*": [text("any-code")],
                         "profile:*": [profile(bottleneck="latency")]})
    with FakeLlm(protocol, scenario) as server:
        got = [reply_text(protocol, post(server, "code", "stage2.tiling")) for _ in range(3)]
        other_stage = reply_text(protocol, post(server, "code", "stage1.seeds"))
        prof = json.loads(reply_text(protocol, post(server, "profile", "stage2.tiling")))
        prof_default = json.loads(reply_text(protocol, post(server, "profile", "stage2.tiling")))
        requests = server.requests
    assert got[:2] == ["tiling-1", "tiling-2"]
    assert got[2] == "any-code", "the stage queue is empty, so the wildcard queue answers"
    assert "class ModelNew" in other_stage, "both queues are empty: the code default"
    assert prof["bottleneck"] == "latency" and prof_default["bottleneck"] == "memory"
    assert [(r.role, r.stage) for r in requests[:4]] == [("code", "stage2.tiling")] * 3 + [("code", "stage1.seeds")]
    assert server.count(role="profile") == 2 and server.count(role="code", stage="stage2.tiling") == 3


def test_records_headers_conversation_and_repairs(protocol):
    with FakeLlm(protocol, Scenario()) as server:
        post(server, "code", "stage1.seeds", user="write a kernel")
        post(server, "code", "stage1.seeds", user="Your reply could not be used because: no code block")
        first, second = server.requests
    assert first.conversation[0] == {"role": "system", "content": system_line("code", "stage1.seeds")}
    assert first.conversation[1] == {"role": "user", "content": "write a kernel"}
    assert not first.is_repair and second.is_repair
    assert first.answered and first.status == 200 and "class ModelNew" in first.reply_text
    assert first.prompt_key != second.prompt_key
    if protocol == "openai":
        assert first.headers["authorization"] == f"Bearer {KEY}"
    else:
        assert first.headers["x-api-key"] == KEY and first.headers["anthropic-version"] == "2023-06-01"
    assert first.body["model"] == "fake-model"


def test_http_error_with_headers_then_success(protocol):
    scenario = Scenario({"code:*": [http_error(429, headers={"Retry-After": "1"}), http_error(500)]})
    with FakeLlm(protocol, scenario) as server:
        with pytest.raises(urllib.error.HTTPError) as limited:
            post(server, "code", "stage1.seeds")
        with pytest.raises(urllib.error.HTTPError) as failed:
            post(server, "code", "stage1.seeds")
        ok = post(server, "code", "stage1.seeds")
        requests = server.requests
    assert limited.value.code == 429 and limited.value.headers["Retry-After"] == "1"
    assert failed.value.code == 500
    assert "class ModelNew" in reply_text(protocol, ok)
    assert [r.status for r in requests] == [429, 500, 200]
    assert [r.answered for r in requests] == [False, False, True]


def test_hang_answers_nothing_within_its_time():
    with FakeLlm("openai", Scenario({"code:*": [hang(30)]})) as server:
        start = time.monotonic()
        with pytest.raises((socket.timeout, TimeoutError, urllib.error.URLError)):
            post(server, "code", "stage1.seeds", timeout_s=1.5)
        assert 1.4 < time.monotonic() - start < 10
        seen = server.wait_for(lambda r: r.role == "code", timeout_s=1)
        assert seen is not None and not seen.answered
        stop_start = time.monotonic()
    assert time.monotonic() - stop_start < 5, "stopping the server ends the hanging handler"


def test_short_hang_closes_without_a_reply():
    with FakeLlm("anthropic", Scenario({"code:*": [hang(0.5)]})) as server:
        with pytest.raises((urllib.error.URLError, ConnectionError, http.client.HTTPException)):
            post(server, "code", "stage1.seeds", timeout_s=10)
        assert "class ModelNew" in reply_text("anthropic", post(server, "code", "stage1.seeds"))


def test_wait_for_returns_none_after_timeout():
    with FakeLlm("openai", Scenario()) as server:
        start = time.monotonic()
        assert server.wait_for(lambda r: True, timeout_s=0.3) is None
        assert time.monotonic() - start >= 0.3


def test_rejects_bad_requests(protocol):
    with FakeLlm(protocol, Scenario(), expected_key=KEY) as server:
        with pytest.raises(urllib.error.HTTPError) as wrong_key:
            post(server, "code", "stage1.seeds", key="sk-wrong")
        with pytest.raises(urllib.error.HTTPError) as unrouted:
            post(server, "code", "stage1.seeds", system="You are helpful.")
        assert "class ModelNew" in reply_text(protocol, post(server, "code", "stage1.seeds"))
        requests = server.requests
    assert wrong_key.value.code == 401 and unrouted.value.code == 400
    assert requests[1].role is None
    assert [r.action is None for r in requests] == [True, True, False], "rejected requests consume no action"


def test_wrong_path_is_404():
    with FakeLlm("anthropic", Scenario()) as server:
        request = urllib.request.Request(f"http://127.0.0.1:{server.port}/v1/chat/completions", b"{}",
                                         {"Content-Type": "application/json"}, method="POST")
        with pytest.raises(urllib.error.HTTPError) as error:
            urllib.request.urlopen(request, timeout=5)
    assert error.value.code == 404


def test_anthropic_refuses_system_role_in_messages():
    with FakeLlm("anthropic", Scenario()) as server:
        body = {"model": "m", "max_tokens": 10, "messages": [{"role": "system", "content": "x"}]}
        request = urllib.request.Request(server.base_url + "/v1/messages", json.dumps(body).encode(),
                                         {"anthropic-version": "2023-06-01", "x-api-key": KEY}, method="POST")
        with pytest.raises(urllib.error.HTTPError) as error:
            urllib.request.urlopen(request, timeout=5)
    assert error.value.code == 400


def test_bad_scenario_key():
    with pytest.raises(ValueError):
        Scenario({"coder:*": [text("x")]})
    with pytest.raises(ValueError):
        Scenario().add("code", text("x"))


def test_fix_is_a_debug_reply():
    assert '"diagnosis": "typo"' in fix("relu_ok.py", diagnosis="typo").text


def test_script_prints_its_port_and_serves():
    script = FIXTURES.parent / "fake_llm.py"
    proc = subprocess.Popen([sys.executable, str(script), "--protocol", "openai", "--port", "0"],
                            stdout=subprocess.PIPE, text=True)
    try:
        port = int(proc.stdout.readline())

        class Remote:
            protocol = "openai"
            base_url = f"http://127.0.0.1:{port}/v1"
        assert "class ModelNew" in reply_text("openai", post(Remote, "code", "stage1.seeds"))
    finally:
        proc.terminate()
        proc.wait(timeout=10)

import os
import struct
import sys

from conftest import candidate_path, task_path
from egg_worker import HARNESS_VERSION, server

SPARE_WORKERS = 4


def test_hello_reports_versions_and_cpu_device(worker):
    response = worker.request("hello")
    assert response["ok"] is True
    assert response["worker_version"] == HARNESS_VERSION == "1"
    assert response["pid"] == worker.process.pid
    assert set(response["versions"]) == {"python", "torch", "triton", "cuda"}
    assert response["versions"]["python"] == ".".join(map(str, sys.version_info[:3]))
    device = response["device"]
    assert device["kind"] == "cpu" and device["name"]
    assert device["total_memory_bytes"] > 0


def test_bad_requests_each_get_one_line_errors(worker):
    replies = []
    worker.send_bytes(struct.pack(">I", 5) + b"{oops")
    replies.append(worker.receive())
    worker.send_bytes(struct.pack(">I", 6) + b"[1, 2]")
    replies.append(worker.receive())
    worker.send({"op": "hello"})
    replies.append(worker.receive())
    worker.send({"id": 5, "op": "transmogrify"})
    replies.append(worker.receive())
    worker.send({"id": 6, "op": "evaluate", "task": task_path("relu_64")})
    replies.append(worker.receive())
    assert [reply["id"] for reply in replies] == [None, None, None, 5, 6]
    assert all(reply["ok"] is False and reply["error"] and "\n" not in reply["error"] for reply in replies)
    assert "JSON" in replies[0]["error"] and "not an object" in replies[1]["error"]
    assert "integer id" in replies[2]["error"] and "transmogrify" in replies[3]["error"]
    assert "candidate" in replies[4]["error"]
    assert worker.request("hello")["ok"] is True


def test_evaluate_with_a_broken_task_or_missing_file_is_a_request_error(worker):
    broken = worker.request("evaluate", task=task_path("no_get_inputs"), candidate=candidate_path("relu_ok"),
                                  device="cpu")
    assert broken["ok"] is False and "get_inputs" in broken["error"]
    missing = worker.request("evaluate", task=task_path("relu_64"), candidate="/nonexistent/c.py", device="cpu")
    assert missing["ok"] is False and "not found" in missing["error"]


def test_shutdown_answers_then_exits_zero(fresh_worker):
    assert fresh_worker.request("shutdown") == {"id": 1, "ok": True}
    assert fresh_worker.process.wait(timeout=30) == 0


def test_eof_ends_the_worker_with_status_zero(fresh_worker):
    fresh_worker.process.stdin.close()
    assert fresh_worker.process.wait(timeout=30) == 0


def test_truncated_frame_ends_the_worker_with_status_one(fresh_worker):
    fresh_worker.send_bytes(struct.pack(">I", 100) + b"{}")
    fresh_worker.process.stdin.close()
    assert fresh_worker.process.wait(timeout=30) == 1


def test_prints_of_a_candidate_go_to_stderr_not_into_frames(fresh_worker):
    result = fresh_worker.evaluate("relu_64", "noisy_relu")
    assert result["status"] == "ok"
    assert fresh_worker.request("hello")["ok"] is True
    log = fresh_worker.stderr_text()
    assert "candidate import says hello on stdout" in log and "junk" in log


def test_profile_ops_answer_ok_false_when_the_profile_module_cannot_be_imported(monkeypatch):
    import egg_worker
    monkeypatch.setitem(sys.modules, "egg_worker.profile", None)
    monkeypatch.delattr(egg_worker, "profile", raising=False)
    for op in ("profile", "peaks"):
        response = server.respond({"id": 3, "op": op, "device": "cpu"})
        assert response["ok"] is False and response["id"] == 3
        assert "unavailable" in response["error"] and "\n" not in response["error"]


def test_profile_ops_dispatch_to_the_profile_module(monkeypatch):
    class FakeProfile:
        handle_profile = staticmethod(lambda request: {"kernels": [request["id"]]})
        measure_peaks = staticmethod(lambda request: {"dram_bytes_per_s": 1.0})

    monkeypatch.setitem(sys.modules, "egg_worker.profile", FakeProfile)
    import egg_worker
    monkeypatch.setattr(egg_worker, "profile", FakeProfile, raising=False)
    assert server.respond({"id": 4, "op": "profile"}) == {"id": 4, "ok": True, "result": {"kernels": [4]}}
    assert server.respond({"id": 5, "op": "peaks"}) == {"id": 5, "ok": True, "result": {"dram_bytes_per_s": 1.0}}


def test_a_response_that_cannot_be_encoded_becomes_ok_false(tmp_path):
    out_path = tmp_path / "frames"
    with open(out_path, "wb") as frames_out:
        server.send(frames_out, {"id": 9, "ok": True, "result": {"x": float("inf")}})
    from egg_worker.protocol import read_frame
    with open(out_path, "rb") as frames_in:
        response = read_frame(frames_in)
    assert response["id"] == 9 and response["ok"] is False and "not encodable" in response["error"]
    assert os.path.getsize(out_path) > 4


def test_request_trace_writes_statistics_and_one_line_per_request(tmp_path, capsys):
    import pstats
    trace = server.RequestTrace(str(tmp_path / "prof"))
    assert trace.respond({"id": 1, "op": "hello"})["ok"] is True
    assert trace.respond({"id": 2, "op": "transmogrify"})["ok"] is False
    lines = [line for line in capsys.readouterr().err.splitlines() if line.startswith("egg-worker:")]
    assert [line.split()[1] for line in lines] == ["hello", "transmogrify"]
    stats = pstats.Stats(trace.path)
    assert any(name == "handle_hello" for (_file, _line, name) in stats.stats)

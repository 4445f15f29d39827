import math

import pytest
import torch

from egg_worker import timing


def test_stats_are_numpy_statistics_in_milliseconds():
    stats = timing.stats_ms([5.0, 1.0, 3.0, 2.0, 4.0])
    assert stats == {"mean": 3.0, "median": 3.0, "p20": pytest.approx(1.8), "p80": pytest.approx(4.2),
                     "std": pytest.approx(math.sqrt(2.0)), "n": 5}


def test_settings_defaults_and_validation():
    assert timing.parse_settings(None) == timing.TimingSettings(True, 10, 100, 10.0)
    assert timing.parse_settings({"enabled": False, "min_trials": 7}) == timing.TimingSettings(False, 10, 7, 10.0)
    for bad in ({"min_trials": 0}, {"warmup": -1}, {"budget_s": -1.0}, "fast"):
        with pytest.raises(ValueError):
            timing.parse_settings(bad)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs cuda")
def test_cuda_timing_stops_at_min_trials_and_flushes_l2():
    calls = []
    x = torch.randn(1 << 20, device="cuda")
    settings = timing.TimingSettings(True, warmup=3, min_trials=12, budget_s=10.0)
    stats = timing.time_cuda(lambda t: calls.append(t.sum()), [x], settings, x.device)
    assert stats["n"] == 12 and len(calls) == 1 + 3 + 12
    assert 0 < stats["p20"] <= stats["median"] <= stats["p80"]
    flush = timing._flush_buffers[x.device.index]
    assert flush.numel() >= max(3 * torch.cuda.get_device_properties(x.device).L2_cache_size, 256 << 20)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs cuda")
def test_cuda_timing_stops_on_budget_after_ten_trials():
    x = torch.randn(16, device="cuda")
    settings = timing.TimingSettings(True, warmup=0, min_trials=100000, budget_s=0.0)
    assert timing.time_cuda(lambda t: t * 2, [x], settings, x.device)["n"] == 10


def test_cpu_wall_timing_measures_calls_and_names_its_timer():
    import time as _time
    calls = []

    def slow(x):
        calls.append(x)
        _time.sleep(0.01)

    stats = timing.time_cpu_wall(slow, (1,), timing.TimingSettings(min_trials=100, budget_s=10.0, cpu_wall=True))
    assert stats["timer"] == timing.CPU_WALL_TIMER
    assert stats["n"] == timing.CPU_WALL_TRIALS
    assert len(calls) == timing.CPU_WALL_TRIALS + 1, "one warm-up call, then the timed ones"
    assert stats["median"] >= 10.0


def test_cpu_wall_is_off_unless_asked():
    assert timing.parse_settings({"enabled": True}).cpu_wall is False
    assert timing.parse_settings({"cpu_wall": True}).cpu_wall is True


def test_evaluate_on_cpu_times_only_with_cpu_wall(worker):
    plain = worker.evaluate("relu_64", "relu_ok", timing={"enabled": True})
    assert plain["status"] == "ok" and plain["time_ms"]["candidate"] is None
    walled = worker.evaluate("relu_64", "relu_ok", timing={"enabled": True, "cpu_wall": True, "min_trials": 2})
    assert walled["status"] == "ok"
    assert walled["time_ms"]["candidate"]["timer"] == timing.CPU_WALL_TIMER
    assert walled["time_ms"]["candidate"]["n"] == 2


def test_synchronized_timing_counts_work_that_finishes_only_at_the_device_synchronize(monkeypatch):
    """A call whose kernels run on a side stream returns before its work is done; the synchronized timer waits
    for the whole device, so that work is in its figure."""
    import time as _time
    pending = []

    def side_stream_call():
        pending.append(0.02)  # 20 ms of work on a stream the caller does not wait for

    def device_synchronize(*_):
        while pending:
            _time.sleep(pending.pop())

    monkeypatch.setattr(timing, "_synchronize", device_synchronize)
    monkeypatch.setattr(timing, "_flush_buffer", lambda device: None)
    monkeypatch.setattr(timing, "_zero", lambda flush: None)
    settings = timing.TimingSettings(True, warmup=1, min_trials=3, budget_s=10.0)
    stats = timing.time_cuda_synchronized(side_stream_call, [], settings, torch.device("cpu"))
    assert stats["timer"] == timing.SYNCHRONIZED_TIMER and stats["n"] == 3
    assert stats["p20"] >= 20.0


def test_protocol_states_calls_flush_region_inputs_and_precisions():
    settings = timing.TimingSettings(True, warmup=7, min_trials=50, budget_s=2.0)
    described = timing.protocol(settings, torch.device("cpu"), "cpu-interpreter-wall", "a test", 3, 42,
                                {"candidate": "strict", "eager": "default"})
    assert described["timer"] == "cpu-interpreter-wall" and described["process"] == "a test"
    assert (described["warmup_calls"], described["timed_calls"], described["budget_s"]) == (7, 50, 2.0)
    assert described["statistic"] == "median" and described["l2_flush_bytes"] is None  # no flush off the GPU
    assert "manual_seed(3)" in described["inputs"] and "reused" in described["inputs"]
    assert described["precision"] == {"candidate": "strict", "eager": "default"}
    untimed = timing.protocol(settings, torch.device("cpu"), "none", "a test", 3, 42, {})
    assert untimed["timed_calls"] == 0 and untimed["timed_region"] is None and untimed["statistic"] is None


def test_precision_name_reads_the_process_settings():
    from egg_worker import precision
    for name in ("strict", "tf32", "default"):
        with precision.applied(precision.get(name)):
            assert timing.precision_name() == name

"""egg_worker.timeit in-process: its CPU path for real, its GPU path with the timers faked (no GPU here)."""

import json

import pytest
import torch

from conftest import candidate_path, task_path
from egg_worker import guards, timeit, timing


def test_cpu_checks_correctness_and_times_nothing(capsys):
    assert timeit.main([task_path("relu_64"), candidate_path("relu_ok"), "--json", "--trials", "2"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["correct"] is True and result["trials_passed"] == 2 and result["triton_launches"] == 1
    assert result["time_ms"] == {"candidate": None, "eager": None, "compile": None}
    assert "correctness only" in result["timing_note"]
    assert result["timing_protocol"]["timer"] == "none"
    assert result["timing_protocol"]["precision"] == {"candidate": "strict", "eager": "default", "compile": "default"}


def test_a_wrong_candidate_exits_1_with_the_trial_that_failed(capsys):
    assert timeit.main([task_path("relu_64"), candidate_path("zeros"), "--trials", "1"]) == 1
    out = capsys.readouterr().out
    assert "correct: NO (0 of 1 trials" in out and "trial 0" in out


def test_bad_precision_and_missing_task_exit_2(capsys):
    assert timeit.main([task_path("relu_64"), candidate_path("relu_ok"), "--precision", "fast"]) == 2
    assert timeit.main(["missing_task.py", candidate_path("relu_ok")]) == 2
    assert "error" in capsys.readouterr().err


def fake_stats(median):
    return {"mean": median * 1.1, "median": median, "p20": median * 0.9, "p80": median * 1.2, "std": 0.1, "n": 100}


def test_gpu_path_times_eager_compile_then_the_candidate_under_their_settings(monkeypatch):
    timed = []

    def fake_time_cuda(fn, args, settings, device):
        timed.append((type(fn).__name__, timing.precision_name(), settings))
        return fake_stats({"Model": 2.0, "Compiled": 1.0}.get(type(fn).__name__, 0.5))

    monkeypatch.setattr(timing, "time_cuda", fake_time_cuda)
    monkeypatch.setattr(timing, "host_call_ms", lambda fn, args: fake_stats(0.49))
    monkeypatch.setattr(guards, "kernel_trace", lambda fn, args: (fn(*args), None, "no profiler here"))
    monkeypatch.setattr(torch, "compile", lambda model: Compiled())
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *args: None)
    args = timeit.parse_args([task_path("relu_64"), candidate_path("relu_ok"), "--trials", "1", "--precision", "tf32",
                              "--timing-trials", "30"])
    times = timeit.time_all(*_built(args), args, torch.device("cpu"))
    assert [(name, setting) for name, setting, _ in timed] == [
        ("Model", "tf32"), ("Compiled", "tf32"), ("ModelNew", "strict")]
    assert all(settings.min_trials == 30 and settings.warmup == 10 for _, _, settings in timed)
    assert times["compile_s"] is not None and times["compile_error"] == ""
    result = {"task": "t.py", "candidate": "c.py", "device": {"name": "GPU", "kind": "cuda"}, "correct": True,
              "trials": 1, "trials_passed": 1, "tol": 0.01, "max_abs_err": 0.0, "reason": "", "triton_launches": 3,
              "time_ms": {key: times[key] for key in ("candidate", "eager", "compile")},
              "host_call_ms": times["host_call"], "compile_s": times["compile_s"], "compile_baseline_error": "",
              "timing_note": "", "timing_protocol": timeit._protocol(args, torch.device("cpu"), times)}
    result.update(timeit._speedups(result["time_ms"]))
    assert result["speedup_median_vs_eager"] == 4.0 and result["speedup_median_vs_compile"] == 2.0
    text = timeit.render(result)
    assert "speedup (medians): 4.00x vs eager, 2.00x vs torch.compile" in text
    assert "launch-bound" in text and "timer cuda-events" in text and "30 timed calls" in text


def test_one_compiled_module_is_timed_at_every_batch_though_it_has_no_len(monkeypatch):
    # torch.compile(Model, dynamic=True) is made once and handed to each batch; testing it for truth called len(),
    # which the compiled module forwards to Model: every batch's compile baseline failed on the H100.
    timed = []
    monkeypatch.setattr(timing, "time_cuda", lambda fn, args, settings, device: timed.append(fn) or fake_stats(1.0))
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *args: None)
    monkeypatch.setattr(torch, "compile", lambda model: pytest.fail("compiled again"))
    compiled = NoLen()
    stats, compile_s, error = timeit._time_compiled(None, [torch.ones(2)], None, torch.device("cpu"), compiled)
    assert error == "" and compile_s is not None and stats["median"] == 1.0
    assert timed == [compiled]


class NoLen(torch.nn.Module):
    """Like torch.compile's module around a task's Model: len() raises."""

    def __len__(self):
        raise TypeError("Model does not support len()")

    def forward(self, *args):
        return None


class Compiled(torch.nn.Module):
    """What the faked torch.compile returns: calls nothing, times as 'Compiled'."""

    def __call__(self, *args):
        return None


def _built(args):
    from egg_worker import loader

    task = loader.load_task(args.task)
    device = torch.device("cpu")
    reference = loader.reference_model(task, device, args.init_seed)
    module = loader.load_candidate(args.candidate)
    return task, reference, loader.build_model(module.ModelNew, task, device, args.init_seed)

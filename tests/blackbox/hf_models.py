"""Coverage of real models: tiny Hugging Face transformers models through egg's capture and expert compiler.

    .venv/bin/python tests/blackbox/hf_models.py [--out DIR] [MODEL ...]     # the survey table, by hand
    .venv/bin/python -m pytest -q tests/blackbox/test_hf_models.py   # the same, as a test (in the default run)

Each model is built from its config class at a tiny size (hidden 32, 2 layers, sequence 8; no weights downloaded),
in eval mode, and then, on the CPU in Triton's interpreter:
1. captured in-process by the worker's capture (`egg_worker.capture.capture(model, inputs)`): a failure here is a
   capture failure;
2. exported as a torch.export program (`egg.api.export`, as egg.optimize does) and compiled by `egg compile
   PROGRAM.pt2 --json` at seed 0: its `pytorch_ops` are the ops the compiler leaves to PyTorch;
3. checked by `egg eval PROGRAM.pt2 CANDIDATE.py`: the candidate is correct against the module.
docs/expert.md, "Coverage of real models", has the table this printed.
"""
import argparse
import collections
import json
import os
import pathlib
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[2]
EGG = ROOT / "egg"
VOCAB = 64


def _outputs(model, field: str):
    """`model`'s forward returning one tensor of its ModelOutput (what a user's script would read)."""
    import torch

    class Output(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.model = model

        def forward(self, *inputs):
            return getattr(self.model(*inputs), field)

    return Output()


def _token_ids():
    import torch
    return torch.randint(0, VOCAB, (2, 8))


def build(name: str):
    """(module in eval mode, example inputs) for one surveyed model, seeded."""
    import torch
    import transformers as hf

    torch.manual_seed(0)
    layers = dict(num_hidden_layers=2, num_attention_heads=4, intermediate_size=64)
    if name == "llama":
        config = hf.LlamaConfig(vocab_size=VOCAB, hidden_size=32, num_key_value_heads=2, max_position_embeddings=64,
                                use_cache=False, **layers)
        model, inputs = _outputs(hf.LlamaForCausalLM(config), "logits"), [_token_ids()]
    elif name == "gpt2":
        config = hf.GPT2Config(vocab_size=VOCAB, n_embd=32, n_layer=2, n_head=4, n_positions=64, use_cache=False,
                               bos_token_id=0, eos_token_id=0)
        model, inputs = _outputs(hf.GPT2LMHeadModel(config), "logits"), [_token_ids()]
    elif name == "bert":
        config = hf.BertConfig(vocab_size=VOCAB, hidden_size=32, max_position_embeddings=64, **layers)
        mask = torch.ones(2, 8, dtype=torch.long)
        mask[1, 5:] = 0  # the second sequence is padded: the attention mask has work to do
        model, inputs = _outputs(hf.BertModel(config), "last_hidden_state"), [_token_ids(), mask]
    elif name == "vit":
        config = hf.ViTConfig(image_size=16, patch_size=4, hidden_size=32, **layers)
        model, inputs = _outputs(hf.ViTModel(config), "last_hidden_state"), [torch.rand(2, 3, 16, 16)]
    elif name == "resnet":
        config = hf.ResNetConfig(embedding_size=8, hidden_sizes=[8, 16], depths=[1, 1])
        model, inputs = _outputs(hf.ResNetModel(config), "pooler_output"), [torch.rand(2, 3, 32, 32)]
    else:
        raise ValueError(f"no surveyed model {name!r}")
    return model.eval(), inputs


MODELS = ("llama", "gpt2", "bert", "vit", "resnet")


def capture_and_export(name: str, out: pathlib.Path) -> dict:
    """Steps 1 and 2's export, in this process (TRITON_INTERPRET=1 set before triton is imported)."""
    os.environ["TRITON_INTERPRET"] = "1"
    sys.path.insert(0, str(ROOT / "python"))
    from egg import api
    from egg_worker import capture

    model, inputs = build(name)
    out.mkdir(parents=True, exist_ok=True)
    result = {"model": name, "class": type(model.model).__name__}
    try:
        graph = capture.capture(model, inputs)
    except Exception as error:  # the survey reports every capture failure, whatever torch raised
        result.update(capture="failed", capture_error=" ".join(str(error).split())[:400])
    else:
        result.update(capture="ok", nodes=len(graph["nodes"]),
                      captured_ops=dict(collections.Counter(node["op"] for node in graph["nodes"])))
    api.export(model, inputs, str(out / "program.pt2"))
    return result


def survey(name: str, out: pathlib.Path, env=None) -> dict:
    """One model through all three steps; a dict of what each found."""
    out.mkdir(parents=True, exist_ok=True)
    env = dict(env or os.environ)
    env.pop("TRITON_INTERPRET", None)
    proc = subprocess.run([sys.executable, __file__, "--capture-only", "--out", str(out), name], capture_output=True,
                          text=True, env=env, timeout=600)
    if proc.returncode != 0:
        return {"model": name, "capture": "failed", "capture_error": proc.stderr.strip().splitlines()[-1:]}
    result = json.loads((out / "capture.json").read_text())
    program, candidate = out / "program.pt2", out / "model_new.py"
    proc = subprocess.run([str(EGG), "compile", str(program), "--json", "--device", "cpu", "--seed", "0",
                           "--out", str(candidate)], capture_output=True, text=True, env=env, timeout=600)
    if proc.returncode != 0:
        result.update(compile="failed", compile_error=proc.stderr.strip()[-400:])
        return result
    compiled = json.loads(proc.stdout)
    result.update(compile="ok", kernels=len(compiled["kernels"]), pytorch_ops=compiled["pytorch_ops"],
                  planner_notes=compiled["planner_notes"])
    proc = subprocess.run([str(EGG), "eval", str(program), str(candidate), "--json", "--device", "cpu", "--no-cache"],
                          capture_output=True, text=True, env=env, timeout=600)
    evaluation = json.loads(proc.stdout) if proc.stdout.strip() else {}
    result.update(correct=bool(evaluation.get("correct")), eval_status=evaluation.get("status", "no result"),
                  eval_reason=evaluation.get("reason") or proc.stderr.strip()[-300:],
                  max_abs_err=evaluation.get("max_abs_err"))
    return result


def left_to_pytorch(result: dict) -> dict:
    """{op: count} of the ops the compiler left to PyTorch."""
    return dict(sorted(collections.Counter(result.get("pytorch_ops", [])).items()))


def table(results: list) -> str:
    lines = ["| model | capture | nodes | kernels | correct | left to PyTorch |", "|---|---|---|---|---|---|"]
    for r in results:
        left = ", ".join(f"`{op}` x{n}" if n > 1 else f"`{op}`" for op, n in left_to_pytorch(r).items()) or "none"
        capture = r["capture"] if r["capture"] == "ok" else f"failed: {r.get('capture_error')}"
        lines.append(f"| {r['model']} ({r.get('class', '?')}) | {capture} | {r.get('nodes', '-')} | "
                     f"{r.get('kernels', '-')} | {r.get('correct', '-')} | {left} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="*", metavar="MODEL", help=f"any of {', '.join(MODELS)} (default: all)")
    parser.add_argument("--out", help="folder for the programs, candidates and results (default: a temporary one)")
    parser.add_argument("--capture-only", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    unknown = [name for name in args.models if name not in MODELS]
    if unknown:
        parser.error(f"no surveyed model {', '.join(unknown)} (choose from {', '.join(MODELS)})")
    args.models = args.models or list(MODELS)
    out = pathlib.Path(args.out or tempfile.mkdtemp(prefix="egg-hf-"))
    if args.capture_only:
        (name,) = args.models
        (out / "capture.json").write_text(json.dumps(capture_and_export(name, out)))
        return 0
    results = []
    for name in args.models:
        results.append(survey(name, out / name))
        print(json.dumps(results[-1]), file=sys.stderr, flush=True)
    (out / "results.json").write_text(json.dumps(results, indent=1))
    print(table(results))
    print(f"(details: {out / 'results.json'})")
    bad = [r for r in results if r["capture"] != "ok" or r.get("compile") != "ok" or not r.get("correct")]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())

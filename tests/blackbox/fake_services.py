"""Loopback fakes of today's LLM APIs, all in one server, for black-box tests of `egg optimize --backend llm`.

One ThreadingHTTPServer on 127.0.0.1 serves OpenAI Chat Completions (/v1/chat/completions), OpenAI Responses
(/v1/responses) and Anthropic Messages (/v1/messages). The `model` of each request picks a ModelRules entry of
MODELS, which says what that service accepts; a request it refuses gets the status and error body the real
service documents (OpenAI's {"error": {message, type, param, code}}, Anthropic's {"type": "error", "error":
{type, message}}, vLLM's {"object": "error", ...}). A request it accepts is answered like fake_llm.FakeLlm: routed
by its system prompt's first line to the default actions (a correct ReLU kernel for code and debug), in the
reply shape of its API. Every request is recorded with what was answered.

    with FakeServices() as server:
        server.base_url("openai")      # "http://127.0.0.1:PORT/v1"
        server.base_url("anthropic")   # "http://127.0.0.1:PORT"
"""
import dataclasses
import http.server
import json
import threading
import time
from typing import Optional

import fake_llm as f

DRAFT = f._source_of("llm/relu_wrong.py").rstrip("\n")


@dataclasses.dataclass(frozen=True)
class ModelRules:
    """What one model accepts and how it answers."""
    api: str  # "openai" (Chat Completions and, unless chat_only, Responses) | "responses" (Responses only) | "anthropic"
    reasoning: bool = False  # OpenAI reasoning: refuses max_tokens, temperature != 1 and top_p
    efforts: tuple = ()  # accepted reasoning_effort values (reasoning models)
    reasoning_tokens: int = 0  # spent from the cap before the answer; a cap too small leaves content ""
    cached_share: float = 0.0  # the share of input tokens reported as cached (prompt caching)
    max_output: int = 0  # the model's output ceiling (Anthropic's 400 when max_tokens exceeds it)
    rejects_temperature: bool = False  # Claude Opus 4.7 and later
    overloaded_first: int = 0  # Anthropic 529 overloaded_error for the first N requests
    errors_in_200_first: int = 0  # OpenRouter-style {"error": {...}} inside HTTP 200 for the first N requests
    think_inline: bool = False  # a local reasoning model without a reasoning parser: <think> + a draft first
    context_tokens: int = 0  # vLLM: 400 when input + max_tokens exceeds it
    truncates: bool = False  # cuts the reply at max_tokens with finish_reason "length"
    echoes_key: bool = False  # a proxy that echoes the Authorization header in its 400


MODELS = {
    "gpt-5.1": ModelRules("openai", reasoning=True, efforts=("none", "low", "medium", "high"),
                          reasoning_tokens=1500, cached_share=0.5),
    "o4-mini": ModelRules("openai", reasoning=True, efforts=("low", "medium", "high"), reasoning_tokens=2000),
    "gpt-5.1-codex-max": ModelRules("responses", reasoning=True, efforts=("low", "medium", "high", "xhigh"),
                                    reasoning_tokens=1000, cached_share=0.25),
    "claude-sonnet-4-5": ModelRules("anthropic", max_output=64000, overloaded_first=2, cached_share=0.5),
    "claude-opus-4-7": ModelRules("anthropic", max_output=128000, rejects_temperature=True),
    "qwq-local": ModelRules("openai", think_inline=True, context_tokens=8192),
    "small-cap-local": ModelRules("openai", truncates=True),
    "router/flaky-model": ModelRules("openai", errors_in_200_first=2),
    "leaky-proxy": ModelRules("openai", echoes_key=True),
}


class Refused(Exception):
    """A request the service refuses: `status` and the JSON `body` it answers with."""

    def __init__(self, status: int, body: dict):
        super().__init__(body)
        self.status = status
        self.body = body


def openai_error(status, message, param=None, code=None, kind="invalid_request_error"):
    return Refused(status, {"error": {"message": message, "type": kind, "param": param, "code": code}})


def anthropic_error(status, kind, message):
    return Refused(status, {"type": "error", "error": {"type": kind, "message": message}})


def tokens(text: str) -> int:
    return len(text) // f.CHARS_PER_TOKEN


@dataclasses.dataclass
class Seen:
    """One request as the server saw it."""
    path: str
    model: str
    body: dict
    raw_body: str
    headers: dict
    role: Optional[str]
    stage: Optional[str]
    status: int = 0
    reply: dict = dataclasses.field(default_factory=dict)
    arrived_s: float = 0.0
    done_s: float = 0.0


def _conversation(path: str, body: dict) -> list:
    if path.endswith("/responses"):
        messages = [{"role": "system", "content": body["instructions"]}] if body.get("instructions") else []
        items = body.get("input") if isinstance(body.get("input"), list) else []
        return messages + [{"role": m.get("role"), "content": f._content_text(m.get("content"))} for m in items]
    protocol = "anthropic" if path.endswith("/messages") else "openai"
    return f._conversation(protocol, body)


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_POST(self):
        services = self.server.services
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0)).decode("utf-8", "replace")
        try:
            body = json.loads(raw)
        except ValueError:
            body = {}
        body = body if isinstance(body, dict) else {}
        conversation = _conversation(self.path, body)
        system = next((m["content"] for m in conversation if m["role"] == "system"), "")
        role, stage = f._route(system)
        seen = Seen(self.path, str(body.get("model", "")), body, raw, {k.lower(): v for k, v in self.headers.items()},
                    role, stage, arrived_s=time.monotonic())
        try:
            status, reply = services.answer(seen, conversation)
        except Refused as refused:
            status, reply = refused.status, refused.body
        seen.status, seen.reply, seen.done_s = status, reply, time.monotonic()
        services.record(seen)
        data = json.dumps(reply).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True


class FakeServices:
    """The server; a context manager. `hold_s` keeps every code request open that long (to see overlap)."""

    def __init__(self, hold_s: float = 0.0):
        self.hold_s = hold_s
        self._lock = threading.Lock()
        self._seen = []
        self._counts = {}
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.services = self
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def base_url(self, protocol: str) -> str:
        root = f"http://127.0.0.1:{self._server.server_address[1]}"
        return root if protocol == "anthropic" else root + "/v1"

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)

    def reset(self):
        with self._lock:
            self._seen.clear()
            self._counts.clear()

    def seen(self, model: Optional[str] = None) -> list:
        with self._lock:
            return [s for s in self._seen if model is None or s.model == model]

    def max_in_flight(self, model: str, role: str = "code") -> int:
        spans = [(s.arrived_s, s.done_s) for s in self.seen(model) if s.role == role]
        return max((sum(1 for a, d in spans if a <= start < d) for start, _ in spans), default=0)

    def record(self, seen: Seen):
        with self._lock:
            self._seen.append(seen)

    def _next(self, model: str) -> int:
        """1 for the model's first request since reset, then 2, 3..."""
        with self._lock:
            self._counts[model] = self._counts.get(model, 0) + 1
            return self._counts[model]

    # -- validation, as each service documents it -------------------------------------------------------------

    def answer(self, seen: Seen, conversation: list):
        rules = MODELS.get(seen.model)
        anthropic = seen.path == "/v1/messages"
        if rules is None:
            if anthropic:
                raise anthropic_error(404, "not_found_error", f"model: {seen.model}")
            raise openai_error(404, f"The model `{seen.model}` does not exist or you do not have access to it.",
                               code="model_not_found")
        if seen.path not in ("/v1/chat/completions", "/v1/responses", "/v1/messages"):
            raise openai_error(404, f"Invalid URL (POST {seen.path})")
        if anthropic != (rules.api == "anthropic"):
            raise openai_error(404, f"model {seen.model} is not served at {seen.path}")
        if seen.role is None:
            raise openai_error(400, "the system prompt does not start with 'egg-agent: <role> stage=<stage>'")
        number = self._next(seen.model)
        if anthropic:
            cap = self._check_anthropic(seen, rules, number)
        elif seen.path == "/v1/responses":
            cap = self._check_responses(seen, rules)
        else:
            cap = self._check_chat(seen, rules, conversation, number)
        if seen.role == "code" and self.hold_s:
            time.sleep(self.hold_s)
        text = f.Scenario().next_action(seen.role, seen.stage).text
        if rules.think_inline:
            text = f"<think>\nA first draft:\n```python\n{DRAFT}\n```\nNo: that adds 0.5.\n</think>\n\n{text}"
        return 200, self._reply(seen, rules, conversation, text, cap)

    def _check_chat(self, seen, rules, conversation, number) -> int:
        body = seen.body
        if rules.echoes_key:
            raise openai_error(400, f"proxy: cannot forward header Authorization: {seen.headers.get('authorization')}")
        if rules.api == "responses":
            raise openai_error(404, "This model is only supported in v1/responses and not in v1/chat/completions.",
                               param="model")
        if rules.errors_in_200_first and number <= rules.errors_in_200_first:
            raise Refused(200, {"error": {"message": "Provider returned error", "code": 502,
                                          "metadata": {"provider_name": "fake-upstream"}}})
        if not isinstance(body.get("messages"), list) or not body["messages"]:
            raise openai_error(400, "'messages' must be a non-empty array", param="messages")
        if rules.reasoning:
            self._check_reasoning(body, rules, "max_tokens", "reasoning_effort", body.get("reasoning_effort"))
            return self._cap(body, "max_completion_tokens")
        cap = self._cap(body, "max_tokens")
        if rules.context_tokens:
            used = sum(tokens(m["content"]) for m in conversation)
            if used + cap > rules.context_tokens:
                raise Refused(400, {"object": "error", "type": "BadRequestError", "param": None, "code": 400,
                                    "message": f"This model's maximum context length is {rules.context_tokens} "
                                               f"tokens. However, you requested {used + cap} tokens ({used} in the "
                                               f"messages, {cap} in the completion). Please reduce the length of "
                                               f"the messages or completion."})
        return cap

    def _check_responses(self, seen, rules) -> int:
        body = seen.body
        if rules.api != "responses":
            raise openai_error(400, f"The fake serves {seen.model} through Chat Completions only.", param="model")
        if not isinstance(body.get("input"), (list, str)) or not body["input"]:
            raise openai_error(400, "Missing required parameter: 'input'.", param="input")
        for unknown in ("messages", "max_completion_tokens"):
            if unknown in body:
                raise openai_error(400, f"Unsupported parameter: '{unknown}'.", param=unknown)
        effort = (body.get("reasoning") or {}).get("effort")
        self._check_reasoning(body, rules, "max_tokens", "reasoning.effort", effort)
        return self._cap(body, "max_output_tokens")

    @staticmethod
    def _check_reasoning(body, rules, refused_cap, effort_name, effort):
        if refused_cap in body:
            raise openai_error(400, f"Unsupported parameter: '{refused_cap}' is not supported with this model. "
                                    "Use 'max_completion_tokens' instead.", param=refused_cap,
                               code="unsupported_parameter")
        for sampling in ("temperature", "top_p"):
            if sampling in body and body[sampling] != 1:
                raise openai_error(400, f"Unsupported value: '{sampling}' does not support {body[sampling]} with "
                                        "this model. Only the default (1) value is supported.", param=sampling,
                                   code="unsupported_value")
        if effort is not None and effort not in rules.efforts:
            raise openai_error(400, f"Invalid value: '{effort}'. Supported values are: {list(rules.efforts)}.",
                               param=effort_name, code="invalid_value")

    def _check_anthropic(self, seen, rules, number) -> int:
        body = seen.body
        if seen.headers.get("anthropic-version") != "2023-06-01":
            raise anthropic_error(400, "invalid_request_error", "anthropic-version: header is required")
        if rules.overloaded_first and number <= rules.overloaded_first:
            raise anthropic_error(529, "overloaded_error", "Overloaded")
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages or messages[0].get("role") != "user":
            raise anthropic_error(400, "invalid_request_error", "messages: the first message must use the user role")
        if any(m.get("role") not in ("user", "assistant") for m in messages):
            raise anthropic_error(400, "invalid_request_error", "messages: roles must be user or assistant")
        if rules.rejects_temperature and "temperature" in body:
            raise anthropic_error(400, "invalid_request_error",
                                  f"temperature: this parameter is not supported for {seen.model}")
        if "temperature" in body and "top_p" in body:
            raise anthropic_error(400, "invalid_request_error",
                                  "`temperature` and `top_p` cannot both be specified for this model.")
        if not isinstance(body.get("max_tokens"), int) or body["max_tokens"] < 1:
            raise anthropic_error(400, "invalid_request_error", "max_tokens: Field required")
        if body["max_tokens"] > rules.max_output:
            raise anthropic_error(400, "invalid_request_error",
                                  f"max_tokens: {body['max_tokens']} > {rules.max_output}, which is the maximum "
                                  f"allowed number of output tokens for {seen.model}")
        return body["max_tokens"]

    @staticmethod
    def _cap(body, name) -> int:
        cap = body.get(name)
        if cap is not None and (not isinstance(cap, int) or cap < 1):
            raise openai_error(400, f"Invalid '{name}': integer below minimum value.", param=name)
        return cap or 1 << 20

    # -- replies in each API's shape ----------------------------------------------------------------------------

    def _reply(self, seen, rules, conversation, text, cap) -> dict:
        input_tokens = sum(tokens(m["content"]) for m in conversation)
        cached = int(input_tokens * rules.cached_share)
        room = cap - rules.reasoning_tokens
        cut = room < tokens(text) or (rules.truncates and tokens(text) > cap)
        if cut:
            text = text[:max(0, room) * f.CHARS_PER_TOKEN] if rules.truncates else ""
        output_tokens = min(cap, rules.reasoning_tokens + tokens(text))
        if seen.path == "/v1/messages":
            return {"id": "msg_fake", "type": "message", "role": "assistant", "model": seen.model,
                    "content": [{"type": "text", "text": text}], "stop_reason": "max_tokens" if cut else "end_turn",
                    "stop_sequence": None,
                    "usage": {"input_tokens": input_tokens - cached, "cache_read_input_tokens": cached,
                              "cache_creation_input_tokens": 0, "output_tokens": output_tokens}}
        if seen.path == "/v1/responses":
            return {"id": "resp_fake", "object": "response", "status": "incomplete" if cut else "completed",
                    "incomplete_details": {"reason": "max_output_tokens"} if cut else None, "model": seen.model,
                    "output": [{"type": "reasoning", "id": "rs_fake", "summary": []},
                               {"type": "message", "id": "msg_fake", "status": "completed", "role": "assistant",
                                "content": [{"type": "output_text", "text": text, "annotations": []}]}],
                    "usage": {"input_tokens": input_tokens, "input_tokens_details": {"cached_tokens": cached},
                              "output_tokens": output_tokens,
                              "output_tokens_details": {"reasoning_tokens": rules.reasoning_tokens},
                              "total_tokens": input_tokens + output_tokens}}
        return {"id": "chatcmpl-fake", "object": "chat.completion", "created": int(time.time()), "model": seen.model,
                "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                             "finish_reason": "length" if cut else "stop"}],
                "usage": {"prompt_tokens": input_tokens, "completion_tokens": output_tokens,
                          "total_tokens": input_tokens + output_tokens,
                          "prompt_tokens_details": {"cached_tokens": cached},
                          "completion_tokens_details": {"reasoning_tokens": rules.reasoning_tokens}}}

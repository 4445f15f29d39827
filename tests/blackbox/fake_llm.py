"""A fake LLM server for black-box tests of `egg optimize --backend llm`.

A real HTTP server on 127.0.0.1 (ephemeral port) speaking either the OpenAI Chat Completions protocol
(POST /v1/chat/completions) or Anthropic Messages (POST /v1/messages). Each request is routed by the first line
of its system prompt, `egg-agent: <profile|code|debug> stage=<stage>`, to a Scenario, which answers with the
next queued Action for the most specific key ("code:stage1.seeds", then "code:*") or the role's default.
Every request is recorded (headers, body, conversation, what was answered) for the tests to inspect.

    with FakeLlm("openai", Scenario()) as server:
        server.base_url   # "http://127.0.0.1:PORT/v1" (Anthropic: "http://127.0.0.1:PORT")

As a script: `python fake_llm.py --protocol openai --port 0` prints the port and serves default replies.
"""
import argparse
import collections
import dataclasses
import http.server
import json
import pathlib
import re
import threading
import time
from typing import Callable, Optional

FIXTURES = pathlib.Path(__file__).resolve().parent / "fixtures"
PROTOCOLS = ("openai", "anthropic")
ROLES = ("profile", "code", "debug")
ROUTE_LINE = re.compile(r"^egg-agent: (profile|code|debug) stage=(\S+)\s*$")
REPAIR_PREFIX = "Your reply could not be used"
CHARS_PER_TOKEN = 4


@dataclasses.dataclass(frozen=True)
class Action:
    """What the fake does with one request: reply `text`, fail with `status`, or hang for `hang_s`."""
    kind: str  # "reply" | "http_error" | "hang"
    text: str = ""
    status: int = 200
    headers: tuple = ()
    hang_s: float = 0.0


def _source_of(path_or_text) -> str:
    if isinstance(path_or_text, pathlib.Path):
        return path_or_text.read_text()
    if "\n" not in path_or_text and path_or_text.endswith(".py"):
        path = pathlib.Path(path_or_text)
        return (path if path.is_absolute() else FIXTURES / path).read_text()
    return path_or_text


def code(path_or_text, description="a Triton candidate", move="rewrite", diagnosis=None) -> Action:
    """A Code reply (```json {description, move} + ```python file); with `diagnosis`, a Debug reply.

    `path_or_text`: a Path, a "*.py" name relative to fixtures/ (e.g. "llm/relu_slow.py"), or the source.
    """
    header = {"diagnosis": diagnosis} if diagnosis is not None else {"description": description, "move": move}
    source = _source_of(path_or_text).rstrip("\n")
    return Action("reply", f"```json\n{json.dumps(header)}\n```\n```python\n{source}\n```\n")


def fix(path_or_text, diagnosis="the kernel was repaired") -> Action:
    """A Debug reply: ```json {diagnosis} + ```python repaired file."""
    return code(path_or_text, diagnosis=diagnosis)


def profile(bottleneck="memory", move="use a larger BLOCK", near_roofline=False, evidence=None,
            rationale="the kernel is small and memory bound") -> Action:
    report = {"bottleneck": bottleneck, "evidence": evidence or ["dram_throughput_pct=42"], "move": move,
              "rationale": rationale, "near_roofline": near_roofline}
    return Action("reply", json.dumps(report))


def design_move(kernel: str, field: str, value, description="a design move") -> Action:
    """A hybrid Code reply that moves one field of the incumbent's design record (the compiler realizes it)."""
    move = {"kernel": kernel, "field": field, "value": value, "description": description}
    return Action("reply", f"```json\n{json.dumps(move)}\n```\n")


def text(raw: str) -> Action:
    """Any raw reply text (for malformed cases)."""
    return Action("reply", raw)


def http_error(status: int, body=None, headers=None) -> Action:
    if body is None:
        body = json.dumps({"error": {"type": "fake_error", "message": f"fake HTTP {status}"}})
    return Action("http_error", body, status, tuple((headers or {}).items()))


def hang(seconds: float) -> Action:
    """Accept the request, answer nothing for `seconds` (or until the server stops), then close."""
    return Action("hang", hang_s=seconds)


def default_actions() -> dict:
    return {"code": code("relu_ok.py", move="one program per 128 elements"),
            "debug": fix("relu_ok.py"),
            "profile": profile()}


class Scenario:
    """Per (role, stage) queues of actions; `key` is "role:stage" or "role:*". Thread-safe."""

    def __init__(self, queues: Optional[dict] = None, defaults: Optional[dict] = None):
        self._lock = threading.Lock()
        self._queues = collections.defaultdict(collections.deque)
        self.defaults = dict(default_actions(), **(defaults or {}))
        for key, actions in (queues or {}).items():
            self.add(key, *actions)

    def add(self, key: str, *actions: Action) -> "Scenario":
        role, _, stage = key.partition(":")
        if role not in ROLES or not stage:
            raise ValueError(f"bad scenario key {key!r}: expected 'role:stage' or 'role:*'")
        with self._lock:
            self._queues[key].extend(actions)
        return self

    def pending(self, key: str) -> int:
        with self._lock:
            return len(self._queues[key])

    def next_action(self, role: str, stage: str) -> Action:
        with self._lock:
            for key in (f"{role}:{stage}", f"{role}:*"):
                if self._queues[key]:
                    return self._queues[key].popleft()
            return self.defaults[role]


@dataclasses.dataclass
class Request:
    """One request as the fake saw it, and what it did with it."""
    time_s: float  # time.monotonic() at arrival
    path: str
    headers: dict  # lower-case names
    body: dict
    raw_body: str
    role: Optional[str]
    stage: Optional[str]
    system: str
    conversation: list  # [{"role", "content"}], the system prompt first, for both protocols
    is_repair: bool
    action: Optional[Action] = None
    status: Optional[int] = None
    reply_text: Optional[str] = None
    answered: bool = False  # a 200 reply with text was sent

    @property
    def prompt_key(self) -> str:
        return json.dumps(self.conversation, sort_keys=True)

    @property
    def last_user_message(self) -> str:
        users = [m["content"] for m in self.conversation if m["role"] == "user"]
        return users[-1] if users else ""


def _content_text(content) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(block.get("text", "") for block in content if isinstance(block, dict))
    return ""


def _conversation(protocol: str, body: dict) -> list:
    messages = [{"role": m.get("role"), "content": _content_text(m.get("content"))}
                for m in body.get("messages", []) if isinstance(m, dict)]
    if protocol == "anthropic" and "system" in body:
        messages.insert(0, {"role": "system", "content": _content_text(body["system"])})
    return messages


def _validation_problem(protocol: str, body) -> str:
    if not isinstance(body, dict):
        return "the body is not a JSON object"
    if not isinstance(body.get("model"), str) or not body["model"]:
        return "model must be a non-empty string"
    if not isinstance(body.get("messages"), list) or not body["messages"]:
        return "messages must be a non-empty list"
    if not isinstance(body.get("max_tokens"), int) or body["max_tokens"] <= 0:
        return "max_tokens must be a positive integer"
    allowed = {"user", "assistant"} if protocol == "anthropic" else {"system", "user", "assistant"}
    for message in body["messages"]:
        if not isinstance(message, dict) or message.get("role") not in allowed:
            return f"bad message role (allowed: {sorted(allowed)})"
        if not isinstance(message.get("content"), (str, list)):
            return "message content must be a string or a list of blocks"
    if protocol == "anthropic" and body["messages"][0]["role"] != "user":
        return "the first message must be a user message"
    return ""


def _route(system: str):
    match = ROUTE_LINE.match(system.split("\n", 1)[0]) if system else None
    return (match.group(1), match.group(2)) if match else (None, None)


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: "_Server"

    def log_message(self, *args):  # keep test output clean
        pass

    def do_POST(self):
        fake = self.server.fake
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0)).decode("utf-8", "replace")
        try:
            body = json.loads(raw)
        except ValueError:
            body = None
        conversation = _conversation(fake.protocol, body) if isinstance(body, dict) else []
        system = next((m["content"] for m in conversation if m["role"] == "system"), "")
        role, stage = _route(system)
        last_user = next((m["content"] for m in reversed(conversation) if m["role"] == "user"), "")
        record = Request(time.monotonic(), self.path, {k.lower(): v for k, v in self.headers.items()},
                         body if isinstance(body, dict) else {}, raw, role, stage, system, conversation,
                         last_user.startswith(REPAIR_PREFIX))
        fake._record(record)
        problem = self._protocol_problem(fake, body, record)
        if problem:
            status, message = problem
            return self._send(record, status, json.dumps({"error": {"type": "fake_error", "message": message}}))
        action = fake.scenario.next_action(role, stage)
        if callable(action):  # a scripted reply computed from the request (e.g. from the design record it holds)
            action = action(record)
        record.action = action
        if action.kind == "hang":
            fake._stopping.wait(action.hang_s)
            self.close_connection = True
            return
        if action.kind == "http_error":
            return self._send(record, action.status, action.text, dict(action.headers))
        record.reply_text = action.text
        record.answered = True
        self._send(record, 200, json.dumps(fake._reply_body(record, action.text)))

    def _protocol_problem(self, fake, body, record):
        if self.path != fake.endpoint_path:
            return 404, f"unknown path {self.path}; this fake serves {fake.endpoint_path}"
        if fake.protocol == "anthropic" and not self.headers.get("anthropic-version"):
            return 400, "missing anthropic-version header"
        if fake.expected_key is not None and fake._presented_key(self.headers) != fake.expected_key:
            return 401, "bad or missing API key"
        problem = _validation_problem(fake.protocol, body)
        if problem:
            return 400, problem
        if record.role is None:
            return 400, "the system prompt does not start with 'egg-agent: <role> stage=<stage>'"
        return None

    def _send(self, record, status, payload, headers=None):
        record.status = status
        data = payload.encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, str(value))
        self.end_headers()
        self.wfile.write(data)


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    fake: "FakeLlm"


class FakeLlm:
    """The fake server; a context manager. `requests` lists every request received, in arrival order."""

    def __init__(self, protocol: str, scenario: Optional[Scenario] = None, port: int = 0,
                 expected_key: Optional[str] = None):
        if protocol not in PROTOCOLS:
            raise ValueError(f"protocol must be one of {PROTOCOLS}")
        self.protocol = protocol
        self.scenario = scenario or Scenario()
        self.expected_key = expected_key
        self.endpoint_path = "/v1/chat/completions" if protocol == "openai" else "/v1/messages"
        self._lock = threading.Lock()
        self._requests = []
        self._stopping = threading.Event()
        self._arrived = threading.Condition(self._lock)
        self._server = _Server(("127.0.0.1", port), _Handler)
        self._server.fake = self
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._counter = 0

    @property
    def port(self) -> int:
        return self._server.server_address[1]

    @property
    def base_url(self) -> str:
        root = f"http://127.0.0.1:{self.port}"
        return root + "/v1" if self.protocol == "openai" else root

    @property
    def requests(self) -> list:
        with self._lock:
            return list(self._requests)

    def start(self) -> "FakeLlm":
        self._thread.start()
        return self

    def stop(self):
        self._stopping.set()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    def count(self, role=None, stage=None, repair=None) -> int:
        return len(self.matching(role, stage, repair))

    def matching(self, role=None, stage=None, repair=None) -> list:
        return [r for r in self.requests if (role is None or r.role == role) and
                (stage is None or r.stage == stage) and (repair is None or r.is_repair == repair)]

    def wait_for(self, predicate: Callable[[Request], bool], timeout_s: float) -> Optional[Request]:
        """The first request matching `predicate`, waiting up to `timeout_s` for it to arrive."""
        deadline = time.monotonic() + timeout_s
        with self._arrived:
            while True:
                found = next((r for r in self._requests if predicate(r)), None)
                remaining = deadline - time.monotonic()
                if found is not None or remaining <= 0:
                    return found
                self._arrived.wait(remaining)

    def _record(self, record: Request):
        with self._arrived:
            self._requests.append(record)
            self._arrived.notify_all()

    def _presented_key(self, headers) -> Optional[str]:
        if self.protocol == "anthropic":
            return headers.get("x-api-key")
        auth = headers.get("Authorization") or ""
        return auth[len("Bearer "):] if auth.startswith("Bearer ") else None

    def _reply_body(self, record: Request, reply: str) -> dict:
        with self._lock:
            self._counter += 1
            number = self._counter
        input_tokens = sum(len(m["content"]) for m in record.conversation) // CHARS_PER_TOKEN
        output_tokens = len(reply) // CHARS_PER_TOKEN
        model = record.body.get("model", "")
        if self.protocol == "openai":
            return {"id": f"chatcmpl-fake-{number}", "object": "chat.completion", "created": int(time.time()),
                    "model": model,
                    "choices": [{"index": 0, "message": {"role": "assistant", "content": reply},
                                 "finish_reason": "stop"}],
                    "usage": {"prompt_tokens": input_tokens, "completion_tokens": output_tokens,
                              "total_tokens": input_tokens + output_tokens}}
        return {"id": f"msg_fake_{number}", "type": "message", "role": "assistant", "model": model,
                "content": [{"type": "text", "text": reply}], "stop_reason": "end_turn", "stop_sequence": None,
                "usage": {"input_tokens": input_tokens, "output_tokens": output_tokens}}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--protocol", choices=PROTOCOLS, default="openai")
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args()
    with FakeLlm(args.protocol, Scenario(), port=args.port) as server:
        print(server.port, flush=True)
        try:
            threading.Event().wait()
        except KeyboardInterrupt:
            pass


if __name__ == "__main__":
    main()

"""Frames of the worker protocol: a 4-byte big-endian length, then that many bytes of UTF-8 JSON (one object).

`read_frame` returns the decoded object, None on a clean EOF, and raises `FrameError` for a frame that cannot be
used (the stream stays in step: the payload is consumed); `TruncatedFrame` means the stream ended mid-frame.
`encode_frame` refuses NaN/Infinity (not JSON): callers must send finite numbers or null.
"""

import json
import struct

MAX_FRAME_BYTES = 64 * 1024 * 1024
_HEADER = struct.Struct(">I")
_DISCARD_CHUNK_BYTES = 1 << 20


class FrameError(Exception):
    """A complete frame arrived but is not a usable request (too large, not UTF-8 JSON, not an object)."""


class TruncatedFrame(Exception):
    """The stream ended inside a frame."""


def _read_exact(stream, n_bytes: int) -> bytes:
    chunks = []
    remaining = n_bytes
    while remaining > 0:
        chunk = stream.read(remaining)
        if not chunk:
            break
        chunks.append(chunk)
        remaining -= len(chunk)
    return b"".join(chunks)


def _discard(stream, n_bytes: int) -> None:
    remaining = n_bytes
    while remaining > 0:
        chunk = stream.read(min(remaining, _DISCARD_CHUNK_BYTES))
        if not chunk:
            raise TruncatedFrame(f"stream ended inside an oversized frame ({remaining} bytes missing)")
        remaining -= len(chunk)


def read_frame(stream):
    """Read one frame from a binary stream: a dict, or None at EOF before any header byte."""
    header = _read_exact(stream, _HEADER.size)
    if not header:
        return None
    if len(header) < _HEADER.size:
        raise TruncatedFrame("stream ended inside a frame header")
    (length,) = _HEADER.unpack(header)
    if length > MAX_FRAME_BYTES:
        _discard(stream, length)
        raise FrameError(f"frame of {length} bytes exceeds the {MAX_FRAME_BYTES}-byte limit")
    payload = _read_exact(stream, length)
    if len(payload) < length:
        raise TruncatedFrame(f"stream ended inside a frame ({length - len(payload)} bytes missing)")
    try:
        message = json.loads(payload.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as error:
        raise FrameError(f"frame is not UTF-8 JSON: {error}") from None
    if not isinstance(message, dict):
        raise FrameError(f"frame holds a JSON {type(message).__name__}, not an object")
    return message


def encode_frame(message: dict) -> bytes:
    payload = json.dumps(message, allow_nan=False, separators=(",", ":")).encode("utf-8")
    if len(payload) > MAX_FRAME_BYTES:
        raise FrameError(f"response of {len(payload)} bytes exceeds the {MAX_FRAME_BYTES}-byte limit")
    return _HEADER.pack(len(payload)) + payload

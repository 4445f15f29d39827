import io
import json
import struct

import pytest

from egg_worker.protocol import MAX_FRAME_BYTES, FrameError, TruncatedFrame, encode_frame, read_frame


def frame(payload: bytes) -> bytes:
    return struct.pack(">I", len(payload)) + payload


def test_round_trip_and_clean_eof():
    stream = io.BytesIO(encode_frame({"id": 1, "op": "hello"}) + encode_frame({"id": 2, "text": "é"}))
    assert read_frame(stream) == {"id": 1, "op": "hello"}
    assert read_frame(stream) == {"id": 2, "text": "é"}
    assert read_frame(stream) is None


def test_header_is_big_endian_length_of_utf8_json():
    encoded = encode_frame({"a": "é"})
    payload = json.dumps({"a": "é"}, separators=(",", ":")).encode("utf-8")
    assert encoded == struct.pack(">I", len(payload)) + payload


@pytest.mark.parametrize("payload, message", [
    (b"{not json", "not UTF-8 JSON"),
    (b"\xff\xfe", "not UTF-8 JSON"),
    (b"[1, 2]", "JSON list, not an object"),
])
def test_malformed_frame_is_reported_and_stream_stays_in_step(payload, message):
    stream = io.BytesIO(frame(payload) + encode_frame({"id": 7}))
    with pytest.raises(FrameError, match=message):
        read_frame(stream)
    assert read_frame(stream) == {"id": 7}


def test_oversized_frame_is_skipped():
    length = MAX_FRAME_BYTES + 1
    stream = io.BytesIO(struct.pack(">I", length) + b"x" * length + encode_frame({"id": 8}))
    with pytest.raises(FrameError, match="exceeds"):
        read_frame(stream)
    assert read_frame(stream) == {"id": 8}


@pytest.mark.parametrize("data", [b"\x00\x00", struct.pack(">I", 10) + b"{}"])
def test_truncated_frame(data):
    with pytest.raises(TruncatedFrame):
        read_frame(io.BytesIO(data))


def test_non_finite_numbers_are_refused():
    with pytest.raises(ValueError):
        encode_frame({"x": float("nan")})

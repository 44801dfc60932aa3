"""Sans-IO framing: a 4-byte big-endian size, then that many bytes.

`FrameDecoder.feed(data)` returns the complete frames now available. The size
is checked against `max_frame_bytes` (Kafka's `socket.request.max.bytes`)
before any buffer for the frame exists, so a lying size cannot make us
allocate; a negative or oversized size raises `ProtocolError` and the caller
closes the connection.
"""

from __future__ import annotations

import struct

from jocko_py.protocol.errors import ProtocolError

_SIZE = struct.Struct(">i")


class FrameTooLarge(ProtocolError):
    pass


class FrameDecoder:
    __slots__ = ("max_frame_bytes", "limit_name", "_buf", "_need")

    def __init__(self, max_frame_bytes: int = 104857600):
        self.max_frame_bytes = max_frame_bytes
        # the setting named when a frame is too large (the SASL cap before authentication)
        self.limit_name = "socket.request.max.bytes"
        self._buf = bytearray()
        self._need = -1  # size of the frame being read, -1 while reading its size

    def feed(self, data: bytes | bytearray | memoryview) -> list[bytearray]:
        # Frames are mutable copies: the log patches offsets into produced batches
        # in place, so the copy made here is the only one before the disk write.
        # When nothing is buffered (the common case) frames are cut straight from
        # `data` and only an incomplete tail is kept.
        if self._buf:
            self._buf += data
            buf: bytes | bytearray | memoryview = self._buf
        else:
            buf = data
        frames: list[bytearray] = []
        pos = 0
        n = len(buf)
        while True:
            if self._need < 0:
                if n - pos < 4:
                    break
                size = _SIZE.unpack_from(buf, pos)[0]
                if size < 0:
                    raise ProtocolError(f"negative frame size {size}")
                if size > self.max_frame_bytes:
                    raise FrameTooLarge(
                        f"frame of {size} bytes exceeds {self.limit_name}="
                        f"{self.max_frame_bytes}"
                    )
                self._need = size
                pos += 4
            if n - pos < self._need:
                break
            frames.append(bytearray(memoryview(buf)[pos : pos + self._need]))
            pos += self._need
            self._need = -1
        if buf is self._buf:
            if pos:
                del self._buf[:pos]
        elif pos < n:
            self._buf += memoryview(buf)[pos:]
        return frames

    @property
    def buffered(self) -> int:
        return len(self._buf)


def frame(payload: bytes | bytearray) -> bytes:
    return _SIZE.pack(len(payload)) + bytes(payload)

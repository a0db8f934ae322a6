"""An HTTP/3 server that misbehaves on purpose (aioquic, PyPI), for tests/bench_h3.rs.

Usage: h3_server.py PORT CERT KEY MODE
  Answers every request over HTTP/3 on 127.0.0.1:PORT (UDP) with 200 and a 100-byte
  body, except every third request stream of a connection (the 3rd, 6th, ...), which
  misbehaves as MODE says:
    reset      HEADERS, then the stream reset (H3_INTERNAL_ERROR): a stream error
    frame      a frame of a type reserved for HTTP/2 (0x02): a connection error
    oversized  a HEADERS frame that declares 1 MB: a connection error (excessive load)
    qpack      a field section that refers to a QPACK dynamic table entry before the
               first one (Required Insert Count 0): a reference beyond what was
               inserted, whatever the client's table holds: a connection error (QPACK)
    close      HEADERS and half the body, then CONNECTION_CLOSE (H3_INTERNAL_ERROR)
    limit      none; instead each connection starts with room for 2 request streams
               (aioquic raises the limit as they are used), so a client asking for
               more waits for MAX_STREAMS
    frozen     none; room for no request stream at all, never raised: a client must
               give up on its requests by its timeout, not wait for ever
    dynamic    none; every answer carries the same extra fields, which aioquic's
               QPACK encoder puts in its dynamic table as far as the client allows
  Prints "ready" once listening; exits after 60 s.
"""

import asyncio
import sys

from aioquic.asyncio import serve
from aioquic.asyncio.protocol import QuicConnectionProtocol
from aioquic.h3.connection import H3_ALPN, H3Connection
from aioquic.h3.events import HeadersReceived
from aioquic.quic.configuration import QuicConfiguration

H3_INTERNAL_ERROR = 0x102
BODY = b"v" * 100
HEAD = [(b":status", b"200"), (b"content-length", b"100")]
# Fields no static table entry holds, the same on every answer (mode "dynamic").
REPEATED = [
    (b"server", b"h3_server.py over aioquic"),
    (b"cache-control", b"public, max-age=60, must-revalidate"),
    (b"x-volley-test", b"the same value on every response"),
]
# Raw request-stream bytes of the broken answers (type, length, payload).
RAW = {
    # Type 0x02 (HTTP/2's PRIORITY) is reserved in HTTP/3 (RFC 9114 section 7.2.8).
    "frame": b"\x02\x01\x00",
    # HEADERS whose length says 0x100000 bytes (a four-byte varint), and a few.
    "oversized": b"\x01\x80\x10\x00\x00" + b"\x00" * 16,
    # HEADERS: Required Insert Count 0 and Base 0, then an indexed field line that
    # refers to the dynamic entry just before Base: absolute index -1, never inserted
    # (RFC 9204 sections 4.5.1 and 4.5.2).
    "qpack": b"\x01\x03\x00\x00\x80",
}


class Server(QuicConnectionProtocol):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.h3 = H3Connection(self._quic)
        self.requests = 0
        if MODE in ("limit", "frozen"):
            # aioquic has no setting for it: its connection's own limit, read when the
            # handshake writes the transport parameters (after this constructor);
            # `sent` is what it last announced, from which it decides to raise it.
            limit = self._quic._local_max_streams_bidi
            limit.value = limit.sent = 2 if MODE == "limit" else 0

    def quic_event_received(self, event):
        for ev in self.h3.handle_event(event):
            if isinstance(ev, HeadersReceived):
                self.answer(ev.stream_id)
        self.transmit()

    def answer(self, sid):
        self.requests += 1
        bad = MODE not in ("limit", "dynamic") and self.requests % 3 == 0
        if not bad:
            self.h3.send_headers(sid, HEAD + REPEATED if MODE == "dynamic" else HEAD)
            self.h3.send_data(sid, BODY, end_stream=True)
        elif MODE == "reset":
            self.h3.send_headers(sid, HEAD)
            self._quic.reset_stream(sid, H3_INTERNAL_ERROR)
        elif MODE == "close":
            self.h3.send_headers(sid, HEAD)
            self.h3.send_data(sid, BODY[:50], end_stream=False)
            self.transmit()
            self._quic.close(error_code=H3_INTERNAL_ERROR, reason_phrase="on purpose")
        else:
            self._quic.send_stream_data(sid, RAW[MODE], end_stream=False)


async def main(port, cert, key):
    config = QuicConfiguration(is_client=False, alpn_protocols=H3_ALPN)
    config.load_cert_chain(cert, key)
    server = await serve("127.0.0.1", port, configuration=config, create_protocol=Server)
    print("ready", flush=True)
    try:
        await asyncio.sleep(60)
    finally:
        server.close()


if __name__ == "__main__":
    if len(sys.argv) != 5 or sys.argv[4] not in ("reset", "frame", "oversized", "qpack",
                                                  "close", "limit", "frozen", "dynamic"):
        sys.exit("usage: h3_server.py PORT CERT KEY "
                 "reset|frame|oversized|qpack|close|limit|frozen|dynamic")
    MODE = sys.argv[4]
    asyncio.run(main(int(sys.argv[1]), sys.argv[2], sys.argv[3]))

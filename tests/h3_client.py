"""An HTTP/3 client no one in volley wrote (aioquic, PyPI), for tests/serve_h3.rs.

Usage:
  h3_client.py fetch HOST PORT CA REQUESTS_JSON
      REQUESTS_JSON: [{"method": "GET", "path": "/a", "headers": [["range", "bytes=0-9"]],
                       "body": "text"}, ...], sent over one connection, one after the
      other. Prints one JSON list: per request its status, its fields (lower-case
      names; repeated names joined with ", "), the body's length and SHA-256.
  h3_client.py early HOST PORT CA REQUESTS_JSON
      Fetches /page.html once to get a session ticket, then opens a second connection
      with it and sends every request at once, before the handshake ends: as 0-RTT
      data when the server accepts it. Prints {"early_data_accepted", "session_resumed",
      "answers": [as fetch]}.
  h3_client.py junk HOST PORT
      Sends 300 datagrams of junk (random bytes, and random bytes behind a QUIC long
      header of version 1) and exits.
  h3_client.py stall HOST PORT CA
      Starts a real handshake (sends the client's Initial), then never answers: a
      client that never finishes its handshake. Exits after 0.5 s.
Every wait is bounded (10 s per request); exit status 1 with a line on stderr on any
failure.
"""

import asyncio
import hashlib
import json
import random
import socket
import sys
import time

from aioquic.asyncio.client import connect
from aioquic.asyncio.protocol import QuicConnectionProtocol
from aioquic.h3.connection import H3_ALPN, H3Connection
from aioquic.h3.events import DataReceived, HeadersReceived
from aioquic.quic.configuration import QuicConfiguration
from aioquic.quic.connection import QuicConnection
from aioquic.quic.events import StreamReset


class Client(QuicConnectionProtocol):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.h3 = H3Connection(self._quic)
        self.waiters = {}
        self.answers = {}

    def quic_event_received(self, event):
        if isinstance(event, StreamReset):
            waiter = self.waiters.pop(event.stream_id, None)
            if waiter:
                waiter.set_exception(RuntimeError(f"stream reset {event.error_code}"))
            return
        for ev in self.h3.handle_event(event):
            if not isinstance(ev, (HeadersReceived, DataReceived)):
                continue
            a = self.answers.setdefault(ev.stream_id, {"headers": [], "body": b""})
            if isinstance(ev, HeadersReceived):
                a["headers"] += ev.headers
            else:
                a["body"] += ev.data
            if ev.stream_ended:
                waiter = self.waiters.pop(ev.stream_id, None)
                if waiter:
                    waiter.set_result(a)

    async def request(self, authority, req):
        sid = self._quic.get_next_available_stream_id()
        body = req.get("body", "").encode()
        fields = [
            (b":method", req["method"].encode()),
            (b":scheme", b"https"),
            (b":authority", authority.encode()),
            (b":path", req["path"].encode()),
            (b"user-agent", b"aioquic-test"),
        ] + [(n.encode(), v.encode()) for n, v in req.get("headers", [])]
        self.h3.send_headers(sid, fields, end_stream=not body)
        if body:
            self.h3.send_data(sid, body, end_stream=True)
        waiter = self._loop.create_future()
        self.waiters[sid] = waiter
        self.transmit()
        return await asyncio.wait_for(waiter, 10)


def client_config(ca):
    config = QuicConfiguration(is_client=True, alpn_protocols=H3_ALPN)
    config.load_verify_locations(ca)
    config.server_name = "localhost"
    return config


def summary(a):
    fields = {}
    status = None
    for n, v in a["headers"]:
        n, v = n.decode(), v.decode()
        if n == ":status":
            status = int(v)
        elif n in fields:
            fields[n] += ", " + v
        else:
            fields[n] = v
    return {
        "status": status,
        "headers": fields,
        "len": len(a["body"]),
        "sha256": hashlib.sha256(a["body"]).hexdigest(),
    }


async def fetch(host, port, ca, requests):
    out = []
    config = client_config(ca)
    async with connect(host, port, configuration=config, create_protocol=Client) as c:
        for req in requests:
            out.append(summary(await c.request(f"localhost:{port}", req)))
    return out


async def early(host, port, ca, requests):
    tickets = []
    config = client_config(ca)
    async with connect(
        host,
        port,
        configuration=config,
        create_protocol=Client,
        session_ticket_handler=tickets.append,
    ) as c:
        await c.request(f"localhost:{port}", {"method": "GET", "path": "/page.html"})
        for _ in range(100):
            if tickets:
                break
            await asyncio.sleep(0.02)
    if not tickets:
        raise RuntimeError("the server sent no session ticket")
    config = client_config(ca)
    config.session_ticket = tickets[-1]
    async with connect(
        host, port, configuration=config, create_protocol=Client, wait_connected=False
    ) as c:
        answers = await asyncio.gather(
            *(c.request(f"localhost:{port}", r) for r in requests)
        )
        tls = c._quic.tls
        return {
            "early_data_accepted": tls.early_data_accepted,
            "session_resumed": tls.session_resumed,
            "answers": [summary(a) for a in answers],
        }


def junk(host, port):
    rng = random.Random(24)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        for i in range(300):
            n = rng.choice([1, 7, 40, 1200, 1350])
            body = bytes(rng.getrandbits(8) for _ in range(n))
            if i % 2:
                # Long header, version 1, random connection ids and payload.
                body = bytes([0xC0, 0, 0, 0, 1, 8]) + body
            s.sendto(body, (host, port))


def stall(host, port, ca):
    config = QuicConfiguration(is_client=True, alpn_protocols=H3_ALPN)
    config.load_verify_locations(ca)
    config.server_name = "localhost"
    quic = QuicConnection(configuration=config)
    quic.connect((host, port), now=time.time())
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        for data, addr in quic.datagrams_to_send(now=time.time()):
            s.sendto(data, (host, port))
        time.sleep(0.5)


def main():
    mode = sys.argv[1]
    host, port = sys.argv[2], int(sys.argv[3])
    if mode == "fetch":
        requests = json.loads(sys.argv[5])
        print(json.dumps(asyncio.run(fetch(host, port, sys.argv[4], requests))))
    elif mode == "early":
        requests = json.loads(sys.argv[5])
        print(json.dumps(asyncio.run(early(host, port, sys.argv[4], requests))))
    elif mode == "junk":
        junk(host, port)
    elif mode == "stall":
        stall(host, port, sys.argv[4])
    else:
        raise SystemExit(f"unknown mode {mode}")


if __name__ == "__main__":
    try:
        main()
    except Exception as e:  # one line, for the test's assertion message
        print(f"h3_client: {type(e).__name__}: {e}", file=sys.stderr)
        sys.exit(1)

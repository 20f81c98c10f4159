"""A small QUIC performance-protocol peer (draft-banks-quic-performance, ALPN "perf") on aioquic, a
QUIC stack nobody on the landspeed team wrote: the interop tests run landspeed's perf client against
its server and its client against landspeed's server.

    aioquic_perf.py server PORT CERT KEY       prints "listening PORT", serves until killed
    aioquic_perf.py client HOST PORT UP DOWN   one bidirectional request: DOWN bytes asked for, UP
                                               bytes uploaded; prints one JSON line and exits

aioquic has no back-pressure for stream data (it buffers whatever it is given), so transfers are kept
to a few MiB. The server answers with constant bytes, as most perf servers do.
"""

import asyncio
import json
import ssl
import sys
import time

from aioquic.asyncio import connect, serve
from aioquic.asyncio.protocol import QuicConnectionProtocol
from aioquic.quic.configuration import QuicConfiguration
from aioquic.quic.events import StreamDataReceived

ALPN = ["perf"]
CHUNK = 64 * 1024


class Server(QuicConnectionProtocol):
    """Reads each request's 8-byte size, drains the upload to FIN, then answers."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.heads = {}

    def quic_event_received(self, event):
        if not isinstance(event, StreamDataReceived):
            return
        head = self.heads.setdefault(event.stream_id, bytearray())
        if len(head) < 8:
            head += event.data[: 8 - len(head)]
        if not event.end_stream or len(head) < 8:
            return
        size = int.from_bytes(head, "big")
        sid = event.stream_id
        if sid & 2:  # a unidirectional request: the answer goes on a new unidirectional stream
            if size == 0:
                return
            sid = self._quic.get_next_available_stream_id(is_unidirectional=True)
        while size > CHUNK:
            self._quic.send_stream_data(sid, b"\x2a" * CHUNK)
            size -= CHUNK
        self._quic.send_stream_data(sid, b"\x2a" * size, end_stream=True)
        self.transmit()


class Client(QuicConnectionProtocol):
    """Counts the answer's bytes until its FIN."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.got = 0
        self.done = asyncio.Event()

    def quic_event_received(self, event):
        if isinstance(event, StreamDataReceived):
            self.got += len(event.data)
            if event.end_stream:
                self.done.set()


async def run_server(port, cert, key):
    cfg = QuicConfiguration(is_client=False, alpn_protocols=ALPN, max_datagram_size=1452)
    cfg.load_cert_chain(cert, key)
    await serve("127.0.0.1", port, configuration=cfg, create_protocol=Server)
    print(f"listening {port}", flush=True)
    await asyncio.Future()


async def run_client(host, port, up, down):
    cfg = QuicConfiguration(is_client=True, alpn_protocols=ALPN, max_datagram_size=1452)
    cfg.verify_mode = ssl.CERT_NONE
    async with connect(host, port, configuration=cfg, create_protocol=Client) as p:
        sid = p._quic.get_next_available_stream_id()
        t0 = time.monotonic()
        p._quic.send_stream_data(sid, down.to_bytes(8, "big"))
        left = up
        while left > 0:
            n = min(left, CHUNK)
            p._quic.send_stream_data(sid, bytes(n))
            left -= n
        p._quic.send_stream_data(sid, b"", end_stream=True)
        p.transmit()
        await asyncio.wait_for(p.done.wait(), 60)
        seconds = time.monotonic() - t0
        print(json.dumps({"uploaded": up, "downloaded": p.got, "seconds": seconds}), flush=True)


def main():
    args = sys.argv[1:]
    if args[:1] == ["server"] and len(args) == 4:
        asyncio.run(run_server(int(args[1]), args[2], args[3]))
    elif args[:1] == ["client"] and len(args) == 5:
        asyncio.run(run_client(args[1], int(args[2]), int(args[3]), int(args[4])))
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()

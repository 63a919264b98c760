#!/usr/bin/env python3
"""hung_master.py — a stand-in for a hung master: it listens on a free loopback port, accepts
every connection and never answers (mode `silent`), or answers the status route once like a
master and then never answers again (mode `ping-once`). It writes its port to PORT_FILE and
runs until killed.

  hung_master.py silent|ping-once PORT_FILE
"""
import json
import socket
import sys
import threading
import time

HELD = []  # accepted connections, kept open so the client sees no EOF


def serve(conn, answer):
    if not answer:
        HELD.append(conn)
        return
    conn.recv(65536)
    body = json.dumps({"pid": 0, "version": "stub"}).encode()
    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: "
                 + str(len(body)).encode() + b"\r\n\r\n" + body)
    while conn.recv(65536):  # the next request on this connection gets no answer either
        pass


def main(mode, port_file):
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", 0))
    s.listen(16)
    with open(port_file + ".tmp", "w") as f:
        f.write(str(s.getsockname()[1]))
    import os
    os.rename(port_file + ".tmp", port_file)
    answered = False
    while True:
        conn, _ = s.accept()
        answer = mode == "ping-once" and not answered
        answered = True
        threading.Thread(target=serve, args=(conn, answer), daemon=True).start()


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] not in ("silent", "ping-once"):
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    main(sys.argv[1], sys.argv[2])
    time.sleep(1e9)

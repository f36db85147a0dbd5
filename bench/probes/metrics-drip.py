#!/usr/bin/env python3
"""Hostile-client probe (issue #14): the toy on 2 localities serving --counters-http on PORT while one client sends a byte every 4 s; prints when the job exited.

    python3 bench/probes/metrics-drip.py target/release/toy 9464
"""
import socket, subprocess, sys, time, threading
port = int(sys.argv[2]); exe = sys.argv[1]
t0 = time.time()
p = subprocess.Popen([exe, "--localities", "2", "--counters-http", f"127.0.0.1:{port}"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
s = None
for _ in range(200):
    try:
        s = socket.create_connection(("127.0.0.1", port)); break
    except OSError:
        time.sleep(0.01)
def drip():
    try:
        while True:
            s.send(b"G"); time.sleep(4)
    except OSError:
        pass
if s: threading.Thread(target=drip, daemon=True).start()
p.wait()
print("exit after %.2f s (dripper connected: %s)" % (time.time() - t0, s is not None))

#!/usr/bin/env python3
"""Hostile-peer probe (issue #14): N clients dripping a byte a second at locality 1's data port of a running toy job for SECS seconds; prints its threads and RSS, the exit status and the /network/count/rejected lines.

    python3 bench/probes/data-port-clients.py 1000 10 target/release/toy 40000
"""
import os, socket, subprocess, sys, time, re
N = int(sys.argv[1]); SECS = int(sys.argv[2]); exe = sys.argv[3]
job = subprocess.Popen([exe, "--localities", "2", "--workers", "1", "--phases", sys.argv[4], "--parcels", "1000",
                        "--print-counter", "/network/count/rejected", "--print-counter-interval", "1000"],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
time.sleep(2)
kids = subprocess.run(["pgrep", "-P", str(job.pid)], capture_output=True, text=True).stdout.split()
child = int(kids[0])
ports = re.findall(r"127\.0\.0\.1:(\d+).*pid=%d," % child, subprocess.run(["ss", "-ltnpH"], capture_output=True, text=True).stdout)
print("child", child, "listening on", ports)
def status(pid):
    s = open(f"/proc/{pid}/status").read()
    return int(re.search(r"Threads:\s+(\d+)", s).group(1)), int(re.search(r"VmRSS:\s+(\d+)", s).group(1)) // 1024
print("before: threads, RSS MB", status(child))
clients = []
for _ in range(N):
    c = socket.socket(); c.setblocking(False)
    try: c.connect(("127.0.0.1", int(ports[0])))
    except BlockingIOError: pass
    clients.append(c)
peak = 0
end = time.time() + SECS
while time.time() < end:
    for c in clients:
        try: c.send(b"x")
        except OSError: pass
    t0 = time.time()
    while time.time() - t0 < 1:
        peak = max(peak, status(child)[0]); time.sleep(0.1)
print("during: peak threads", peak, "now threads, RSS MB", status(child))
time.sleep(2.5)
for c in clients: c.close()
out, err = job.communicate(timeout=120)
try: os.kill(child, 9)
except OSError: pass
print("job exit status:", job.returncode)
lines = [l for l in (out + err).splitlines() if "rejected" in l]
print("\n".join(lines[-8:]))

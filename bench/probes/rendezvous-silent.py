#!/usr/bin/env python3
"""Start a 2-locality job by hand (rank 0 serves the rendezvous) with 7 silent
connections to COURIER_ROOT made before rank 1 starts; time the job (issue #14).

    python3 bench/probes/rendezvous-silent.py target/release/toy 19379
"""
import os, socket, subprocess, sys, time
exe = sys.argv[1]; port = int(sys.argv[2])
env = dict(os.environ, COURIER_LOCALITIES="2", COURIER_ROOT=f"127.0.0.1:{port}",
           COURIER_SECRET="0123456789abcdef0123456789abcdef", COURIER_WORKERS="1")
t0 = time.time()
root = subprocess.Popen([exe, "--phases", "2", "--parcels", "1000"], env=dict(env, COURIER_RANK="0"),
                        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
silent = []
while len(silent) < 7 and time.time() - t0 < 5:
    try: silent.append(socket.create_connection(("127.0.0.1", port)))
    except OSError: time.sleep(0.01)
member = subprocess.Popen([exe, "--phases", "2", "--parcels", "1000"], env=dict(env, COURIER_RANK="1"),
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
out, err = root.communicate(timeout=120)
took = time.time() - t0
member.wait(timeout=30)
print(f"{len(silent)} silent connections; root exit {root.returncode}, member exit {member.returncode}, job took {took:.2f} s")
print(out.strip().splitlines()[-1:])
print("\n".join((err.strip().splitlines() or [""])[-3:]))

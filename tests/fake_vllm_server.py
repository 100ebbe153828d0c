"""A stand-in for vLLM's server in the validator's fault tests (given as VALIDATOR_SERVER_COMMAND).

Takes vLLM's flags (ignored, except --host/--port) plus:
  --fake-mode refuse   print an argparse-style error and exit 2, as vLLM does for an unknown flag
  --fake-mode hang     ignore SIGTERM, start a child in the same process group, never answer /health
  --fake-mode serve    answer /health (200) and /metrics (empty) until killed
  --fake-mode stubborn like serve, but it and a child in its process group ignore SIGTERM (only SIGKILL
                       to the group ends them; the parent-death signal alone does not)
  --fake-mode replay   print the file --fake-log (a real vLLM start-up log) and exit 1
  --fake-pid-file P    write "<pid> <child pid>" to P
"""
import argparse
import http.server
import os
import signal
import subprocess
import sys
import time

p = argparse.ArgumentParser(add_help=False)
p.add_argument("--fake-mode", default="serve")
p.add_argument("--fake-pid-file")
p.add_argument("--fake-log")
p.add_argument("--host", default="127.0.0.1")
p.add_argument("--port", type=int, default=8000)
args, rest = p.parse_known_args()

if args.fake_mode == "refuse":
    print("usage: api_server.py [-h] ...", file=sys.stderr)
    print(f"api_server.py: error: unrecognized arguments: {' '.join(r for r in rest if r.startswith('--no-such'))}",
          file=sys.stderr)
    sys.exit(2)

if args.fake_mode == "replay":
    with open(args.fake_log) as f:
        sys.stdout.write(f.read())
    sys.exit(1)

child = None
if args.fake_mode in ("hang", "stubborn"):
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    child = subprocess.Popen([sys.executable, "-c", "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(600)"])
if args.fake_pid_file:
    with open(args.fake_pid_file, "w") as f:
        f.write(f"{os.getpid()} {child.pid if child else ''}")
print("INFO fake server starting", flush=True)
if args.fake_mode == "hang":
    time.sleep(600)
    sys.exit(0)


class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = b"" if self.path == "/metrics" else b"ok"
        self.send_response(200 if self.path in ("/health", "/metrics") else 404)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *a):
        pass


http.server.HTTPServer((args.host, args.port), Handler).serve_forever()

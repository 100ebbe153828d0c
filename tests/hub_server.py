"""A local HTTP server answering the part of the Hugging Face Hub API that huggingface_hub 2.x calls.

Used by the tests and ``benchmarks/hub_lookup.py`` (nothing here reaches the real Hub). It serves:

* ``GET /api/models/{org}/{name}[/revision/{rev}]``: model info (``HfApi.model_info``) with ``id``, ``sha``,
  ``siblings`` (``rfilename``), ``gated``, ``private``;
* ``GET /api/models/{org}/{name}/tree/{rev}[/{path}]``: the file tree (``HfApi.list_repo_tree``), each file's
  ``size`` its length or ``FakeRepo.sizes[path]`` (a big GGUF stood in for by its header);
* ``GET``/``HEAD /{org}/{name}/resolve/{rev}/{path}``: the file at a branch, tag or sha, with the headers
  ``huggingface_hub.file_download`` reads (``X-Repo-Commit``, ``ETag``, ``Content-Length``) and ``Range``
  requests (``206`` + ``Content-Range``) as ``HfApi.parse_safetensors_file_metadata`` makes them.

Errors carry the headers ``huggingface_hub.utils.hf_raise_for_status`` dispatches on, as the Hub sends them:
``X-Error-Code`` ``RepoNotFound`` / ``RevisionNotFound`` / ``EntryNotFound`` / ``GatedRepo`` (401 without a
token, 403 with a token not granted access), and ``X-Error-Message`` "Invalid credentials in Authorization
header" for an unknown token. ``FakeRepo.delay_s`` delays every answer (timeouts); ``FakeRepo.status``
forces a status (429 rate limit, 503). ``requests`` records ``(method, path)`` of every request.
"""
from __future__ import annotations

import hashlib
import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote, urlsplit


@dataclass
class FakeRepo:
    repo_id: str
    commits: dict[str, dict[str, bytes]] = field(default_factory=dict)  # sha -> {path: bytes}
    refs: dict[str, str] = field(default_factory=dict)  # branch / tag -> sha
    gated: bool = False
    private: bool = False
    delay_s: float = 0.0
    status: int | None = None
    sizes: dict[str, int] = field(default_factory=dict)  # path -> size the tree API reports (default: len)


class FakeHub:
    """``with FakeHub() as hub: hub.add_repo("org/name", {"config.json": b"..."})``; ``hub.url`` is the
    endpoint. ``tokens`` maps a valid token to the gated / private repo ids it may read."""

    def __init__(self, tokens: dict[str, set[str]] | None = None):
        self.repos: dict[str, FakeRepo] = {}
        self.tokens = tokens or {}
        self.requests: list[tuple[str, str]] = []
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None

    # ---- content

    def add_repo(self, repo_id: str, files: dict[str, bytes], *, branch: str = "main", **options) -> str:
        """Create (or update) a repo with one commit holding ``files``; returns the commit sha."""
        repo = self.repos.setdefault(repo_id, FakeRepo(repo_id))
        for key, value in options.items():
            setattr(repo, key, value)
        return self.commit(repo_id, files, branch=branch)

    def commit(self, repo_id: str, files: dict[str, bytes], *, branch: str = "main") -> str:
        """A new commit on ``branch`` (the branch moves to it); the sha is derived from the content."""
        repo = self.repos[repo_id]
        digest = hashlib.sha1(repo_id.encode())
        for name in sorted(files):
            digest.update(name.encode() + b"\0" + files[name])
        digest.update(str(len(repo.commits)).encode())
        sha = digest.hexdigest()
        repo.commits[sha] = dict(files)
        repo.refs[branch] = sha
        return sha

    def count(self, method: str | None = None, contains: str = "") -> int:
        with self._lock:
            return sum(1 for m, p in self.requests if (method is None or m == method) and contains in p)

    # ---- server

    @property
    def url(self) -> str:
        assert self._server is not None
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> "FakeHub":
        hub = self

        class Handler(_Handler):
            fake = hub

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._server.block_on_close = False
        threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> "FakeHub":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


class _Handler(BaseHTTPRequestHandler):
    fake: FakeHub
    protocol_version = "HTTP/1.1"

    def handle(self) -> None:
        # a client that gives up mid-response (the tests that time out or cancel on purpose) is not an error of the
        # server: without this, socketserver prints a BrokenPipeError traceback into a passing test run
        try:
            super().handle()
        except (BrokenPipeError, ConnectionResetError):
            pass

    def log_message(self, format, *args):  # keep test output quiet
        pass

    def do_GET(self):
        self._handle(body=True)

    def do_HEAD(self):
        self._handle(body=False)

    # ---- dispatch

    def _handle(self, *, body: bool) -> None:
        path = urlsplit(self.path).path
        if path == "/api/agent-harnesses":
            # huggingface_hub's user-agent code fetches this registry once per process (utils/_detect_agent.py,
            # best effort, 404 is fine). It is not part of a lookup, so it is not counted.
            return self._error(404, message="Not found", body=body)
        with self.fake._lock:
            self.fake.requests.append((self.command, path))
        parts = [unquote(p) for p in path.strip("/").split("/")]
        token = (self.headers.get("authorization") or "").removeprefix("Bearer ").strip() or None
        if token is not None and token not in self.fake.tokens:
            return self._error(401, message="Invalid credentials in Authorization header", body=body)

        if parts[:2] == ["api", "models"] and len(parts) >= 6 and parts[4] == "tree":
            # HfApi.list_repo_tree: /api/models/{repo}/tree/{rev}[/{path}]?recursive=..&expand=..
            repo_id, rev, folder = "/".join(parts[2:4]), parts[5], "/".join(parts[6:])
            repo = self._repo(repo_id, token, body)
            if repo is None:
                return
            sha = self._sha(repo, rev, body)
            if sha is None:
                return
            recursive = "recursive=true" in (urlsplit(self.path).query or "").lower()
            entries, folders = [], set()
            for name, content in sorted(repo.commits[sha].items()):
                if folder and not name.startswith(folder + "/"):
                    continue
                rel = name[len(folder) + 1:] if folder else name
                if "/" in rel and not recursive:
                    folders.add((folder + "/" if folder else "") + rel.split("/")[0])
                    continue
                size = repo.sizes.get(name, len(content))
                entries.append({"type": "file", "oid": hashlib.sha1(content).hexdigest(), "size": size, "path": name})
            entries += [{"type": "directory", "oid": "0" * 40, "size": 0, "path": f} for f in sorted(folders)]
            payload = json.dumps(entries).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            if body:
                self.wfile.write(payload)
            return

        if parts[:2] == ["api", "models"] and len(parts) >= 4:
            repo_id, rest = "/".join(parts[2:4]), parts[4:]
            rev = rest[1] if rest[:1] == ["revision"] and len(rest) == 2 else "main"
            repo = self._repo(repo_id, token, body)
            if repo is None:
                return
            sha = self._sha(repo, rev, body)
            if sha is None:
                return
            return self._json(200, {
                "_id": hashlib.md5(repo_id.encode()).hexdigest()[:24],
                "id": repo_id,
                "modelId": repo_id,
                "author": repo_id.split("/")[0],
                "sha": sha,
                "private": repo.private,
                "gated": "manual" if repo.gated else False,
                "disabled": False,
                "downloads": 0,
                "likes": 0,
                "tags": [],
                "lastModified": "2025-01-01T00:00:00.000Z",
                "siblings": [{"rfilename": name} for name in sorted(repo.commits[sha])],
            }, body=body)

        if len(parts) >= 5 and parts[2] == "resolve":
            repo_id, rev, filename = "/".join(parts[:2]), parts[3], "/".join(parts[4:])
            repo = self._repo(repo_id, token, body)
            if repo is None:
                return
            sha = self._sha(repo, rev, body)
            if sha is None:
                return
            if repo.gated and repo_id not in self.fake.tokens.get(token or "", set()):
                if token is None:
                    return self._error(401, code="GatedRepo", body=body, message=(
                        f"Access to model {repo_id} is restricted. You must have access to it and be "
                        "authenticated to access it. Please log in."))
                return self._error(403, code="GatedRepo", body=body, message=(
                    f"Access to model {repo_id} is restricted and you are not in the authorized list. "
                    f"Visit https://huggingface.co/{repo_id} to ask for access."))
            content = repo.commits[sha].get(filename)
            if content is None:
                return self._error(404, code="EntryNotFound", message=f"{filename} does not exist", body=body)
            return self._file(content, sha, body=body)

        return self._error(404, message="Not found", body=body)

    def _repo(self, repo_id: str, token: str | None, body: bool) -> FakeRepo | None:
        repo = self.fake.repos.get(repo_id)
        if repo is not None and repo.delay_s:
            time.sleep(repo.delay_s)
        if repo is not None and repo.status:
            self._error(repo.status, message="Too Many Requests" if repo.status == 429 else "Error", body=body)
            return None
        if repo is None or (repo.private and repo_id not in self.fake.tokens.get(token or "", set())):
            self._error(404, code="RepoNotFound", message="Repository not found", body=body)
            return None
        return repo

    def _sha(self, repo: FakeRepo, rev: str, body: bool) -> str | None:
        sha = rev if rev in repo.commits else repo.refs.get(rev)
        if sha is None:
            self._error(404, code="RevisionNotFound", message=f"Invalid rev id: {rev}", body=body)
        return sha

    # ---- responses

    def _json(self, status: int, data: dict, *, body: bool) -> None:
        payload = json.dumps(data).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json; charset=utf-8")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        if body:
            self.wfile.write(payload)

    def _error(self, status: int, *, message: str, code: str | None = None, body: bool) -> None:
        payload = json.dumps({"error": message}).encode()
        self.send_response(status)
        if code:
            self.send_header("X-Error-Code", code)
        self.send_header("X-Error-Message", message)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        if body:
            self.wfile.write(payload)

    def _file(self, content: bytes, sha: str, *, body: bool) -> None:
        etag = hashlib.sha256(content).hexdigest()
        start, end, status = 0, len(content) - 1, 200
        spec = self.headers.get("range")
        if spec and spec.startswith("bytes="):
            first, _, last = spec[len("bytes="):].partition("-")
            start = int(first)
            end = min(int(last), len(content) - 1) if last else len(content) - 1
            status = 206
        chunk = content[start:end + 1]
        self.send_response(status)
        self.send_header("X-Repo-Commit", sha)
        self.send_header("ETag", f'"{etag}"')
        self.send_header("Accept-Ranges", "bytes")
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(len(chunk)))
        if status == 206:
            self.send_header("Content-Range", f"bytes {start}-{end}/{len(content)}")
        self.end_headers()
        if body:
            self.wfile.write(chunk)

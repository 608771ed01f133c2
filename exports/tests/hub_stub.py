"""A stand-in for the Hugging Face Hub's HTTP API on 127.0.0.1: the endpoints huggingface_hub
calls to create a dataset repo and commit files (preupload answers "regular" for every file,
so contents arrive base64 in the commit's NDJSON). Records what it received."""

from __future__ import annotations

import base64
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import yaml


class HubStub:
    def __init__(self):
        self.requests: list[tuple[str, str]] = []
        self.repos: list[dict] = []
        self.commits: list[dict] = []
        self.tokens: set[str] = set()
        self.validated: list[dict] = []
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # quiet
                pass

            def _body(self) -> bytes:
                n = int(self.headers.get("Content-Length") or 0)
                if n:
                    return self.rfile.read(n)
                if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
                    out = b""
                    while True:
                        size = int(self.rfile.readline().strip(), 16)
                        if size == 0:
                            self.rfile.readline()
                            return out
                        out += self.rfile.read(size)
                        self.rfile.readline()
                return b""

            def _json(self, status: int, obj) -> None:
                data = json.dumps(obj).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_POST(self):
                body = self._body()
                stub.requests.append(("POST", self.path))
                stub.tokens.add(self.headers.get("Authorization", ""))
                if self.path == "/api/repos/create":
                    repo = json.loads(body)
                    stub.repos.append(repo)
                    full = f"{repo.get('organization') or 'user'}/{repo['name']}"
                    return self._json(200, {"url": f"{stub.url}/datasets/{full}", "name": full})
                if self.path == "/api/validate-yaml":
                    # The real Hub checks the card's metadata; the stand-in checks it parses.
                    sent = json.loads(body)
                    stub.validated.append(sent)
                    text = sent.get("content", "")
                    try:
                        meta = yaml.safe_load(text.split("---", 2)[1]) if text.startswith("---") else None
                    except yaml.YAMLError as exc:
                        return self._json(400, {"error": f"invalid YAML: {exc}"})
                    if text.startswith("---") and not isinstance(meta, dict):
                        return self._json(400, {"error": "metadata is not a mapping"})
                    return self._json(200, {"errors": [], "warnings": []})
                if "/preupload/" in self.path:
                    files = json.loads(body)["files"]
                    return self._json(
                        200,
                        {"files": [{"path": f["path"], "uploadMode": "regular", "shouldIgnore": False} for f in files]},
                    )
                if "/commit/" in self.path:
                    lines = [json.loads(line) for line in body.decode().splitlines() if line.strip()]
                    header = next(x["value"] for x in lines if x["key"] == "header")
                    files = {
                        x["value"]["path"]: base64.b64decode(x["value"]["content"]) for x in lines if x["key"] == "file"
                    }
                    lfs = [x for x in lines if x["key"] == "lfsFile"]
                    stub.commits.append({"path": self.path, "header": header, "files": files, "lfs": lfs})
                    oid = f"{len(stub.commits):040x}"
                    repo = self.path.split("/api/datasets/", 1)[1].split("/commit/", 1)[0]
                    return self._json(200, {"commitUrl": f"{stub.url}/datasets/{repo}/commit/{oid}", "commitOid": oid})
                return self._json(404, {"error": f"stub: no POST {self.path}"})

            def do_GET(self):
                stub.requests.append(("GET", self.path))
                return self._json(404, {"error": f"stub: no GET {self.path}"})

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()

"""Run the cached llama-server on 127.0.0.1 with a model, for tests (stopped by its own PID)."""

from __future__ import annotations

import contextlib
import json
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any


def free_port() -> int:
    with contextlib.closing(socket.socket(socket.AF_INET, socket.SOCK_STREAM)) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class LlamaServer:
    """One llama-server process: `url` is its root (the OpenAI API is under /v1)."""

    def __init__(self, binary: Path, model: Path, log: Path, *, ctx: int = 4096, slots: int = 1,
                 alias: str | None = None, extra: tuple[str, ...] = ()) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = log
        # -np divides -c among the slots: each slot gets ctx tokens only when -c is ctx * slots.
        cmd = [str(binary), "-m", str(model), "--host", "127.0.0.1", "--port", str(self.port),
               "-c", str(ctx * slots), "-np", str(slots), "-t", "1", "--threads-http", "2", "--no-webui",
               "--no-warmup", *(("--alias", alias) if alias else ()), *extra]
        self._log_file = log.open("wb")
        self.proc = subprocess.Popen(cmd, stdout=self._log_file, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)

    def wait_ready(self, timeout: float = 60.0) -> None:
        """Poll /health until it answers 200 (503 while the model loads)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"llama-server exited with {self.proc.returncode}:\n{self.tail()}")
            try:
                with urllib.request.urlopen(f"{self.url}/health", timeout=2) as r:
                    if r.status == 200:
                        return
            except (urllib.error.URLError, OSError):
                pass
            time.sleep(0.1)
        raise RuntimeError(f"llama-server not ready after {timeout:g}s:\n{self.tail()}")

    def tail(self, n: int = 4000) -> str:
        self._log_file.flush()
        return self.log.read_bytes()[-n:].decode("utf-8", "replace")

    def post(self, path: str, body: dict[str, Any]) -> tuple[int, Any]:
        """POST JSON; (status, parsed body) whatever the status."""
        req = urllib.request.Request(f"{self.url}{path}", data=json.dumps(body).encode(), method="POST",
                                     headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=120) as r:
                return r.status, json.loads(r.read())
        except urllib.error.HTTPError as exc:
            return exc.code, json.loads(exc.read())

    def get(self, path: str) -> Any:
        with urllib.request.urlopen(f"{self.url}{path}", timeout=30) as r:
            return json.loads(r.read())

    def stop(self) -> None:
        """Stop this process by its PID: SIGTERM, then SIGKILL if it lingers."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        self._log_file.close()


@contextlib.contextmanager
def running(binary: Path, model: Path, log: Path, **kwargs: Any) -> Iterator[LlamaServer]:
    server = LlamaServer(binary, model, log, **kwargs)
    try:
        server.wait_ready()
        yield server
    finally:
        server.stop()

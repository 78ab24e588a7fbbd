"""A real `redis-server` for tests: a free loopback port, a temporary dir, nothing persisted.

    server = RedisServer(tmp_path); server.start(); ... server.url ...; server.stop()

Started when a test needs it and stopped after; `start` returns once the server answers PING.
Without redis-server on PATH the test is skipped (under CI it fails: scripts/test.sh installs
the Debian package `redis-server`).
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import threading
from pathlib import Path

import pytest

from support.service import free_port

START_SECONDS = 10.0


def _answers_ping(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5) as sock:
            sock.sendall(b"PING\r\n")
            # A server with a password answers -NOAUTH: up all the same.
            return sock.recv(16).startswith((b"+PONG", b"-NOAUTH"))
    except OSError:
        return False


class RedisServer:
    """One redis-server process of this test run."""

    def __init__(self, directory: Path, *extra_args: str) -> None:
        self.directory = directory
        self.extra_args = list(extra_args)  # e.g. "--requirepass", "secret"
        self.port = 0
        self.process: subprocess.Popen[bytes] | None = None
        self._ready = False

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> RedisServer:
        binary = shutil.which("redis-server")
        if binary is None:
            message = "redis-server is not installed (apt-get install redis-server)"
            if os.environ.get("CI"):
                pytest.fail(message)
            pytest.skip(message)
        # The port is free when picked; if another process takes it first, the server exits
        # at once and the next try picks another.
        for _ in range(3):
            self.port = free_port()
            args = ["--port", str(self.port), "--bind", "127.0.0.1", "--save", ""]
            # At "notice", the server logs the line that says it is ready; the start waits for
            # that line instead of polling the port.
            args += ["--appendonly", "no", "--dir", str(self.directory), "--loglevel", "notice"]
            args += self.extra_args
            self.process = subprocess.Popen(
                [binary, *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT
            )
            if self._wait_until_ready():
                return self
        raise RuntimeError(f"redis-server did not start within {START_SECONDS} s")

    def _wait_until_ready(self) -> bool:
        """Waits until the server's log says it accepts connections (or the server exits).

        A thread reads the log line by line with blocking reads, then keeps draining it so
        the server never blocks on a full pipe. (Waiting on the pipe with select while
        reading through Python's buffer can miss a line that arrived in the same chunk as
        the one before it: the start would then wait out its whole bound.)
        """
        assert self.process is not None
        self._ready = False
        settled = threading.Event()
        threading.Thread(target=self._read_log, args=(settled,), daemon=True).start()
        if settled.wait(timeout=START_SECONDS) and self._ready and _answers_ping(self.port):
            return True
        self.stop()
        return False

    def _read_log(self, settled: threading.Event) -> None:
        assert self.process is not None
        assert self.process.stdout is not None
        for line in self.process.stdout:
            if not self._ready and b"Ready to accept connections" in line:
                self._ready = True
                settled.set()
        settled.set()  # the server exited (a taken port, say): the start tries another

    def pause(self) -> None:
        """Freeze the server (SIGSTOP): it keeps its socket but answers nothing."""
        assert self.process is not None
        self.process.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGCONT)

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        self.process.send_signal(signal.SIGCONT)  # a paused server cannot act on SIGTERM
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=10)

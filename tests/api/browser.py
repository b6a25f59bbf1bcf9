"""A page kept open in headless Chromium and questioned over the DevTools protocol: what
the dashboard tests need to watch a page update itself (``--dump-dom`` loads a page once,
on virtual time, and cannot)."""

from __future__ import annotations

import contextlib
import json
import subprocess
import time
from pathlib import Path
from typing import Any

import httpx
from websockets.sync.client import ClientConnection, connect


class Page:
    """``url`` open in a headless Chromium of its own (``profile`` its user data) at
    ``width`` x ``height``; :meth:`evaluate` runs an expression in it."""

    def __init__(self, chromium: str, profile: Path, url: str, width: int = 1400,
                 height: int = 900):
        self.process = subprocess.Popen(
            [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
             "--disable-background-networking", "--disable-component-update",
             "--disable-sync", f"--user-data-dir={profile}", f"--window-size={width},{height}",
             "--remote-debugging-port=0", "--remote-allow-origins=*", url],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self._ids = 0
        self._open = contextlib.ExitStack()
        try:
            port = self._port(profile / "DevToolsActivePort")
            pages = [t for t in httpx.get(f"http://127.0.0.1:{port}/json/list", timeout=10).json()
                     if t["type"] == "page"]
            self.socket: ClientConnection = self._open.enter_context(
                connect(pages[0]["webSocketDebuggerUrl"], max_size=None))
        except BaseException:
            self.close()
            raise

    @staticmethod
    def _port(active: Path, timeout: float = 30.0) -> int:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if active.exists() and active.read_text().strip():
                return int(active.read_text().split()[0])
            time.sleep(0.05)
        raise TimeoutError("Chromium did not open its DevTools port")

    def _call(self, method: str, **params: Any) -> dict[str, Any]:
        self._ids += 1
        self.socket.send(json.dumps({"id": self._ids, "method": method, "params": params}))
        while True:
            answer = json.loads(self.socket.recv(timeout=30))
            if answer.get("id") == self._ids:
                return answer.get("result", {})

    def evaluate(self, expression: str) -> Any:
        """The JSON value of ``expression`` in the page."""
        return self._call("Runtime.evaluate", expression=expression,
                          returnByValue=True)["result"].get("value")

    def press(self, key: str, code: int) -> None:
        """A key pressed and released on the focused element (``key`` as the DOM names it,
        ``code`` its Windows virtual key code: Enter 13, Tab 9)."""
        for kind in ("keyDown", "keyUp"):
            self._call("Input.dispatchKeyEvent", type=kind, key=key, code=key,
                       windowsVirtualKeyCode=code)

    def wait_for(self, expression: str, timeout: float = 60.0) -> Any:
        """Evaluate ``expression`` until it is truthy; its value."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            value = self.evaluate(expression)
            if value:
                return value
            time.sleep(0.1)
        raise TimeoutError(f"the page never satisfied {expression}")

    def close(self) -> None:
        self._open.close()
        self.process.kill()
        self.process.wait(timeout=30)

    def __enter__(self) -> Page:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

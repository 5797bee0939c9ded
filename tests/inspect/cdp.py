"""A minimal Chrome DevTools Protocol client over ``--remote-debugging-pipe``.

Why a pipe and not a websocket: the standard library has no websocket
client and the project adds no dependency for one test. With
``--remote-debugging-pipe`` chromium reads NUL-terminated JSON messages on
fd 3 and writes its own on fd 4; a ``bash -c 'exec ... 3<&R 4>&W'`` wrapper
puts our pipe ends there without a ``preexec_fn`` (unsafe with the live
server's thread running). bash, not sh: dash cannot redirect fds above 9.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import queue
import shutil
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

CHROMIUM_FLAGS = (
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-extensions",
    "--no-first-run",
    "--no-default-browser-check",
    "--hide-scrollbars",
    "--mute-audio",
    "--remote-debugging-pipe",
)


class CDPError(RuntimeError):
    pass


class Chromium:
    """One headless chromium and one page (target) driven over the pipe."""

    def __init__(
        self, executable: str, *, timeout: float = 30.0, width: int = 1280, height: int = 800
    ) -> None:
        self.timeout = timeout
        self.profile = tempfile.mkdtemp(prefix="weft-chromium-")
        to_chrome_r, self._to_chrome_w = os.pipe()
        self._from_chrome_r, from_chrome_w = os.pipe()
        script = (
            f'exec "$@" 3<&{to_chrome_r} 4>&{from_chrome_w} {to_chrome_r}<&- {from_chrome_w}>&-'
        )
        self.stderr_path = Path(self.profile) / "chromium.stderr"
        self._stderr = self.stderr_path.open("wb")
        self.proc = subprocess.Popen(
            [
                "bash",
                "-c",
                script,
                "chromium",
                executable,
                *CHROMIUM_FLAGS,
                f"--user-data-dir={self.profile}",
                f"--window-size={width},{height}",
                "about:blank",
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=self._stderr,
            pass_fds=(to_chrome_r, from_chrome_w),
            start_new_session=True,
        )
        os.close(to_chrome_r)
        os.close(from_chrome_w)
        self._next_id = 0
        self._replies: dict[int, queue.Queue[dict[str, Any]]] = {}
        self._lock = threading.Lock()
        self.events: queue.Queue[dict[str, Any]] = queue.Queue()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self.session: str | None = None
        target = self.call("Target.createTarget", {"url": "about:blank"}, session=False)
        attached = self.call(
            "Target.attachToTarget",
            {"targetId": target["targetId"], "flatten": True},
            session=False,
        )
        self.session = attached["sessionId"]
        self.call("Page.enable")
        self.call(
            "Emulation.setDeviceMetricsOverride",
            {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False},
        )

    # -- transport ---------------------------------------------------------------
    def _read(self) -> None:
        buffer = b""
        with os.fdopen(self._from_chrome_r, "rb", buffering=0) as stream:
            while True:
                chunk = stream.read(65536)
                if not chunk:
                    return
                buffer += chunk
                while b"\0" in buffer:
                    raw, buffer = buffer.split(b"\0", 1)
                    message = json.loads(raw)
                    if "id" in message:
                        with self._lock:
                            box = self._replies.get(message["id"])
                        if box is not None:
                            box.put(message)
                    else:
                        self.events.put(message)

    def call(
        self, method: str, params: dict[str, Any] | None = None, *, session: bool = True
    ) -> dict[str, Any]:
        with self._lock:
            self._next_id += 1
            ident = self._next_id
            box: queue.Queue[dict[str, Any]] = queue.Queue()
            self._replies[ident] = box
        message: dict[str, Any] = {"id": ident, "method": method, "params": params or {}}
        if session and self.session is not None:
            message["sessionId"] = self.session
        os.write(self._to_chrome_w, json.dumps(message).encode() + b"\0")
        try:
            reply = box.get(timeout=self.timeout)
        except queue.Empty:
            raise CDPError(
                f"no reply to {method} within {self.timeout} s; stderr: {self.stderr_tail()}"
            ) from None
        finally:
            with self._lock:
                self._replies.pop(ident, None)
        if "error" in reply:
            raise CDPError(f"{method}: {reply['error']}")
        return dict(reply.get("result", {}))

    # -- page helpers ----------------------------------------------------------
    def set_cookie(self, name: str, value: str, url: str) -> None:
        result = self.call("Network.setCookie", {"name": name, "value": value, "url": url})
        if result.get("success") is False:
            raise CDPError(f"chromium refused cookie {name!r} for {url}")

    def evaluate(self, expression: str) -> Any:
        result = self.call("Runtime.evaluate", {"expression": expression, "returnByValue": True})
        if "exceptionDetails" in result:
            raise CDPError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def navigate(self, url: str) -> str:
        """Load ``url``, wait until the document is complete, return the DOM."""
        reply = self.call("Page.navigate", {"url": url})
        if reply.get("errorText"):
            raise CDPError(f"navigating to {url}: {reply['errorText']}")
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            state = self.evaluate("[document.readyState, location.href]")
            if state and state[0] == "complete" and state[1] != "about:blank":
                return str(self.evaluate("document.documentElement.outerHTML"))
            time.sleep(0.05)
        raise CDPError(f"{url} did not finish loading within {self.timeout} s")

    def screenshot(self, path: Path, *, full_page: bool = True) -> Path:
        params: dict[str, Any] = {"format": "png"}
        if full_page:
            metrics = self.call("Page.getLayoutMetrics")
            size = metrics.get("cssContentSize") or metrics["contentSize"]
            params["clip"] = {
                "x": 0,
                "y": 0,
                "width": size["width"],
                "height": size["height"],
                "scale": 1,
            }
            params["captureBeyondViewport"] = True
        data = self.call("Page.captureScreenshot", params)["data"]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(base64.b64decode(data))
        return path

    def stderr_tail(self) -> str:
        try:
            return self.stderr_path.read_text(errors="replace")[-2000:]
        except OSError:
            return ""

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.call("Browser.close", session=False)
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, 9)
            self.proc.wait(timeout=10)
        os.close(self._to_chrome_w)
        self._stderr.close()
        shutil.rmtree(self.profile, ignore_errors=True)

"""Open the MLflow UI on an experiment in a real (headless) browser and check that the first
page compares the methods: the chart view of the newest configuration, with every method's
run and a bar of each of its key metrics.

    python -m experiments.ops.ui_check --experiment NAME [--tracking-uri URI] [--screenshot PNG]

The tracking URI (default ``MLFLOW_TRACKING_URI``) is a server (``http://...``; credentials
from ``MLFLOW_TRACKING_USERNAME``/``MLFLOW_TRACKING_PASSWORD`` are added by a loopback proxy,
since a browser cannot be given them on the command line) or a database (``sqlite:///...``,
``postgresql://...``), for which a temporary ``mlflow server`` is started on loopback.
Needs Debian's ``chromium``. Exit code 0 when everything was found, 1 when not (what is
missing on one line), 2 when the check could not run.
"""

from __future__ import annotations

import argparse
import base64
import html
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from experiments.results.mlflow_export import (
    CHART_RUNS,
    KEY_METRICS,
    absolute_sqlite,
    is_server_uri,
    ui_url,
    with_pg_driver,
)

CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                  "--no-first-run", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--hide-scrollbars"]


class CheckError(RuntimeError):
    """The check could not run (one line, exit code 2)."""


@dataclass
class Expected:
    """What the first page should show: each method's run and its key metrics."""

    experiment_id: str
    methods: list[str]
    values: dict[str, list[float]] = field(default_factory=dict)  # metric -> each run's
    results_uid: str | None = None


def find_chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    raise CheckError("chromium is not installed (Debian: apt-get install chromium)")


def expected_from_store(uri: str, experiment: str) -> Expected:
    """The experiment's methods (a FINISHED run each, tagged ``method``) and their key
    metrics, from the newest configuration (the first page shows the newest runs)."""
    from mlflow import MlflowClient

    client = MlflowClient(uri)
    exp = client.get_experiment_by_name(experiment)
    if exp is None:
        raise CheckError(f"no experiment {experiment!r} in {uri}")
    runs = client.search_runs([exp.experiment_id], "attributes.status = 'FINISHED'",
                              max_results=1000, order_by=["attributes.start_time DESC"])
    runs = [r for r in runs if "method" in r.data.tags]
    if not runs:
        raise CheckError(f"experiment {experiment!r} has no finished method runs")
    newest = runs[0].data.tags.get("results_uid")
    runs = [r for r in runs if r.data.tags.get("results_uid") == newest]
    out = Expected(exp.experiment_id, sorted({r.data.tags["method"] for r in runs}), {},
                   newest)
    for r in runs:
        for k in KEY_METRICS:
            if k in r.data.metrics:
                out.values.setdefault(k, []).append(r.data.metrics[k])
    return out


# --- serving the UI to the browser ----------------------------------------------------------


def _proxy_handler(upstream: str, auth: str | None) -> type[BaseHTTPRequestHandler]:
    class Proxy(BaseHTTPRequestHandler):
        """Forwards every request to ``upstream``, adding the Authorization header."""

        def _forward(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else None
            req = urllib.request.Request(upstream + self.path, data=body, method=self.command)
            for k, v in self.headers.items():
                if k.lower() not in ("host", "connection", "authorization", "accept-encoding"):
                    req.add_header(k, v)
            if auth:
                req.add_header("Authorization", auth)
            try:
                resp = urllib.request.urlopen(req, timeout=60)  # noqa: S310 - loopback
            except urllib.error.HTTPError as e:
                resp = e
            except (urllib.error.URLError, OSError) as e:
                self.send_error(502, str(e))
                return
            data = resp.read()
            self.send_response(resp.status)
            for k, v in resp.headers.items():
                if k.lower() not in ("transfer-encoding", "connection", "content-length"):
                    self.send_header(k, v)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_POST = do_PATCH = do_DELETE = do_PUT = _forward  # noqa: N815

        def log_message(self, format: str, *args: object) -> None:  # noqa: A002
            pass

    return Proxy


@contextmanager
def loopback_proxy(upstream: str) -> Iterator[str]:
    """A loopback URL serving ``upstream`` with the caller's MLflow credentials added."""
    user = os.environ.get("MLFLOW_TRACKING_USERNAME")
    password = os.environ.get("MLFLOW_TRACKING_PASSWORD")
    auth = None
    if user and password:
        auth = "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _proxy_handler(upstream.rstrip("/"), auth))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@contextmanager
def temporary_server(backend_store_uri: str, timeout: float = 120) -> Iterator[str]:
    """``mlflow server`` on a free loopback port for a database URI (no auth, read only use)."""
    from experiments.ops.team_server import free_port, health, mlflow_command

    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with tempfile.TemporaryDirectory(prefix="ui-check-") as tmp:
        log = Path(tmp) / "server.log"
        env = {**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"}
        with open(log, "wb") as out:
            proc = subprocess.Popen([*mlflow_command(), "server", "--backend-store-uri",
                                     backend_store_uri, "--host", "127.0.0.1", "--port",
                                     str(port), "--workers", "1"], stdout=out,
                                    stderr=subprocess.STDOUT, env=env, cwd=tmp,
                                    start_new_session=True)
        try:
            deadline = time.time() + timeout
            while not health(url):
                if proc.poll() is not None or time.time() > deadline:
                    tail = log.read_text(errors="replace").strip().splitlines()[-1:]
                    raise CheckError(f"mlflow server for {backend_store_uri} did not start: "
                                     f"{tail[0] if tail else '(no output)'}")
                time.sleep(0.5)
            yield url
        finally:
            import signal

            try:
                os.killpg(proc.pid, signal.SIGTERM)
                proc.wait(timeout=20)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


# --- the browser ----------------------------------------------------------------------------


def render(url: str, budget_ms: int = 25000, screenshot: Path | None = None,
           size: str = "2560,1440") -> str:
    """The DOM of ``url`` after the page's scripts ran (headless Chromium)."""
    chromium = find_chromium()
    with tempfile.TemporaryDirectory(prefix="ui-check-profile-") as profile:
        base = [chromium, *CHROMIUM_FLAGS, f"--user-data-dir={profile}",
                f"--window-size={size}", f"--virtual-time-budget={budget_ms}"]
        res = subprocess.run([*base, "--dump-dom", url], capture_output=True, text=True,
                             timeout=budget_ms / 1000 + 90, check=False)
        if res.returncode != 0 or not res.stdout.strip():
            tail = res.stderr.strip().splitlines()[-1:] or ["(no output)"]
            raise CheckError(f"chromium failed (exit {res.returncode}): {tail[0]}")
        if screenshot is not None:
            subprocess.run([*base, f"--screenshot={screenshot}", url], capture_output=True,
                           timeout=budget_ms / 1000 + 90, check=False)
    return res.stdout


def visible_text(dom: str) -> str:
    dom = re.sub(r"(?is)<(script|style)\b.*?</\1>", " ", dom)
    return html.unescape(re.sub(r"(?s)<[^>]+>", " ", dom))


def numbers_in(text: str) -> list[str]:
    return re.findall(r"(?<![\w.])-?\d+(?:\.\d+)?(?![\w.])", text)


def shown(value: float, numbers: list[str]) -> bool:
    """True if ``value`` is among ``numbers`` (as the UI prints it, maybe rounded)."""
    for n in numbers:
        decimals = len(n.split(".")[1]) if "." in n else 0
        if float(n) == value or (decimals >= 2 and
                                 abs(float(n) - value) <= 0.5 * 10 ** -decimals + 1e-12):
            return True
    return False


def missing_on_page(text: str, expected: Expected) -> list[str]:
    """What the page should show but does not (empty list: all there): the runs table, a
    row per method, a column per key metric and every method's value in it."""
    missing = []
    if "Run Name" not in text:
        missing.append("the runs" + (" (the page shows the GenAI overview)"
                                     if "Traces" in text else ""))
    words = set(re.findall(r"[\w.-]+", text))
    missing += [f"the run of {m}" for m in expected.methods if m not in words]
    numbers = numbers_in(text)
    for key, values in expected.values.items():
        if key not in text:
            missing.append(f"the chart of {key}")
            continue
        absent = sum(not shown(v, numbers) for v in values)
        if absent:
            missing.append(f"{absent} of {len(values)} values of {key}")
    if missing and len(expected.methods) > CHART_RUNS:
        missing.append(f"(MLflow's chart view draws the first {CHART_RUNS} runs; this "
                       f"configuration has {len(expected.methods)})")
    return missing


def check(tracking_uri: str, experiment: str, screenshot: Path | None = None,
          attempts: int = 3) -> list[str]:
    """Open the UI on ``experiment`` and return what is missing from its first page. The
    chart view draws its charts after the runs arrive: a page caught before that is
    rendered again, with more time (``attempts`` in all)."""
    server = is_server_uri(tracking_uri)
    uri = tracking_uri if server else with_pg_driver(absolute_sqlite(tracking_uri, Path.cwd()))
    expected = expected_from_store(uri, experiment)
    with (loopback_proxy(uri) if server else temporary_server(uri)) as url:
        for attempt in range(attempts):
            dom = render(ui_url(url, expected.experiment_id, expected.results_uid),
                         budget_ms=25000 * (attempt + 1), screenshot=screenshot)
            missing = missing_on_page(visible_text(dom), expected)
            if not missing:
                break
    return missing


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m experiments.ops.ui_check", description=__doc__
                                .split("\n\n")[0])
    p.add_argument("--experiment", required=True, help="the sweep's experiment (its study)")
    p.add_argument("--tracking-uri", default=os.environ.get("MLFLOW_TRACKING_URI"),
                   help="server or database (default: MLFLOW_TRACKING_URI)")
    p.add_argument("--screenshot", type=Path, help="also save the first page as a PNG")
    args = p.parse_args(argv)
    if not args.tracking_uri:
        print("error: no tracking URI: pass --tracking-uri or set MLFLOW_TRACKING_URI",
              file=sys.stderr)
        return 2
    try:
        missing = check(args.tracking_uri, args.experiment, args.screenshot)
    except CheckError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if missing:
        print(f"not on the first page: {'; '.join(missing)}", file=sys.stderr)
        return 1
    print(f"ok: the UI opens {args.experiment!r} on a chart of every method's "
          f"{', '.join(KEY_METRICS)}" + (f" (screenshot {args.screenshot})"
                                         if args.screenshot else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())

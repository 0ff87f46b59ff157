"""Run a real Prometheus (and VictoriaMetrics, vmalert, Alertmanager) on loopback: used by
``make demo`` and the test suite (the pages they scrape and the webhook receiver: :mod:`gpumon.loopback`).

Starts Debian's ``prometheus`` binary (or ``$GPUMON_PROMETHEUS``) on 127.0.0.1 with a temporary
config and TSDB, waits on ``/-/ready`` (not a sleep), and stops it by PID.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import Callable

import httpx
import yaml

from .loopback import free_port
from .priority import renice


def wait_for(predicate: Callable[[], bool], timeout: float = 60, step: float = 0.5) -> bool:
    """Poll ``predicate`` until it is true or ``timeout`` seconds pass; returns the last result
    (tests wait on a condition, never on a fixed sleep)."""
    deadline = time.monotonic() + timeout
    while True:
        ok = predicate()
        if ok or time.monotonic() > deadline:
            return bool(ok)
        time.sleep(step)


def wait_ready(proc: subprocess.Popen, url: str, timeout: float, name: str, logs: Callable[[], str]) -> None:
    """Poll ``url`` (a server's readiness endpoint) until it answers 200, never a fixed sleep.

    Raises:
        RuntimeError: the process exited, or ``timeout`` seconds passed; ``logs()`` is included.
    """
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{name} exited with {proc.returncode}:\n{logs()}")
        try:
            if httpx.get(url, timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise RuntimeError(f"{name} not ready after {timeout}s:\n{logs()}")


def rfc3339_seconds(text: str) -> float:
    """Unix seconds of an RFC 3339 time as Prometheus writes it (nanosecond fraction, ``Z`` or an
    offset); 0.0 for Go's zero time or anything unparsable (a group that never evaluated)."""
    match = re.fullmatch(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d+))?(Z|[+-]\d\d:\d\d)", text or "")
    if not match:
        return 0.0
    whole, fraction, zone = match.groups()
    stamp = datetime.fromisoformat(whole + ("+00:00" if zone == "Z" else zone)).timestamp()
    return stamp + (float(f"0.{fraction}") if fraction else 0.0)


def stop_process(proc: subprocess.Popen, grace: float = 10) -> None:
    """Stop a server we started, by its PID: SIGTERM, then SIGKILL after ``grace`` seconds."""
    if proc.poll() is None:
        os.kill(proc.pid, signal.SIGTERM)
        try:
            proc.wait(grace)
        except subprocess.TimeoutExpired:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(5)


def prometheus_binary() -> str:
    """Path of the prometheus binary, or raise FileNotFoundError with the install hint."""
    path = os.environ.get("GPUMON_PROMETHEUS") or shutil.which("prometheus")
    if not path:
        raise FileNotFoundError("prometheus not found: apt-get install --no-install-recommends prometheus")
    return path


#: what Go servers log when another process bound their port first (``net.Listen``'s EADDRINUSE)
PORT_TAKEN = "address already in use"
#: starts of a server whose port was taken, each on a new port (:meth:`_LocalServer._spawn`)
PORT_TRIES = 3


class _LocalServer:
    """A server binary started on 127.0.0.1 in a temporary folder, with its log there, waited on
    through ``/-/ready`` and stopped by PID. Subclasses set ``NAME`` and call :meth:`_spawn`."""

    NAME = "server"
    #: the path answering 200 once the server is ready
    READY = "/-/ready"

    def __init__(self, startup_timeout: float):
        self.startup_timeout = startup_timeout
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen | None = None
        self.tmp: tempfile.TemporaryDirectory | None = None
        #: nice value of the server's session (:func:`gpumon.priority.renice`); 0 leaves it
        self.niceness = 0

    def _folder(self) -> Path:
        self.tmp = tempfile.TemporaryDirectory(prefix=f"gpumon-{self.NAME}-")
        return Path(self.tmp.name)

    def _spawn(self, args: list[str]) -> None:
        """Start ``args`` with output to ``<folder>/<NAME>.log`` and wait until :attr:`READY` answers;
        a server that does not get ready is stopped and RuntimeError (with its log) raised.

        :func:`free_port` only says a port was free a moment ago: with many servers starting at once
        another one can take it first, and the server exits saying so. Then it starts again on
        another port (``127.0.0.1:<port>`` in ``args`` replaced), up to :data:`PORT_TRIES` times."""
        for attempt in range(PORT_TRIES):
            self.log = open(Path(self.tmp.name) / f"{self.NAME}.log", "wb")
            self.proc = subprocess.Popen(args, stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True)
            if self.niceness:
                renice(self.proc.pid, self.niceness)
            try:
                wait_ready(self.proc, f"{self.url}{self.READY}", self.startup_timeout, self.NAME, self.logs)
                return
            except RuntimeError:
                taken = self.proc.poll() is not None and PORT_TAKEN in self.logs()
                if not taken or attempt == PORT_TRIES - 1:
                    self.stop()
                    raise
            stop_process(self.proc)
            self.log.close()
            old, self.port = f"127.0.0.1:{self.port}", free_port()
            self.url = f"http://127.0.0.1:{self.port}"
            args = [a.replace(old, f"127.0.0.1:{self.port}") for a in args]

    def logs(self) -> str:
        """The server's log so far (its last 4,000 characters)."""
        try:
            return (Path(self.tmp.name) / f"{self.NAME}.log").read_text(errors="replace")[-4000:]
        except (OSError, AttributeError, TypeError):
            return ""

    def stop(self) -> None:
        """Stop the server by PID (SIGTERM, then SIGKILL after 10 s) and remove its files."""
        if self.proc:
            stop_process(self.proc)
        if getattr(self, "log", None):
            self.log.close()
        if self.tmp:
            self.tmp.cleanup()
            self.tmp = None

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


class _QueryServer(_LocalServer):
    """A :class:`_LocalServer` that answers Prometheus' query API (Prometheus, VictoriaMetrics)."""

    def query(self, expr: str) -> list[dict]:
        """Instant query (Prometheus' ``/api/v1/query``, which VictoriaMetrics serves too); returns
        ``data.result`` (raises httpx.HTTPStatusError on errors)."""
        resp = httpx.get(f"{self.url}/api/v1/query", params={"query": expr}, timeout=10)
        resp.raise_for_status()
        return resp.json()["data"]["result"]

    def wait_for(self, predicate: Callable[[], bool], timeout: float = 60, step: float = 0.5) -> bool:
        """Poll ``predicate`` until it is true or ``timeout`` seconds pass; returns the last result."""
        return wait_for(predicate, timeout, step)


class LocalPrometheus(_QueryServer):
    """A real Prometheus on 127.0.0.1 scraping ``targets`` and loading ``rule_files``.

    Args:
        targets: {job name: [host:port, ...]}.
        rule_files: rule files to load (copied into the temp dir).
        scrape_interval / evaluation_interval: durations such as ``"1s"``.
        scrape_timeout: defaults to the scrape interval.
        extra_args: more command-line flags.
        binary: the prometheus binary (default :func:`prometheus_binary`): tests run 2.x and 3.x.
        external_labels: ``global.external_labels`` (e.g. cluster and replica of an HA pair).
        more_scrape_configs: more ``scrape_configs`` entries as written in prometheus.yml (a job
            scraped at another interval, relabelling).
    Use as a context manager; ``url`` is the base URL once started.
    """

    NAME = "prometheus"

    def __init__(self, targets: dict[str, list[str]], rule_files: list[str | Path] = (),
                 scrape_interval: str = "1s", evaluation_interval: str = "1s",
                 scrape_timeout: str | None = None, extra_args: list[str] = (), startup_timeout: float = 60,
                 binary: str | None = None, external_labels: dict[str, str] | None = None,
                 alertmanagers: list[str] = (), more_scrape_configs: list[dict] = ()):
        self.binary, self.external_labels = binary, dict(external_labels or {})
        self.more_scrape_configs = list(more_scrape_configs)
        self.targets, self.rule_files = targets, [Path(p) for p in rule_files]
        self.alertmanagers = list(alertmanagers)
        self.scrape_interval, self.evaluation_interval = scrape_interval, evaluation_interval
        self.scrape_timeout = scrape_timeout or scrape_interval
        self.extra_args = list(extra_args)
        super().__init__(startup_timeout)

    def _config(self, folder: Path) -> Path:
        rules = []
        for i, src in enumerate(self.rule_files):
            dst = folder / f"rules-{i}-{src.name}"
            dst.write_bytes(src.read_bytes())
            rules.append(str(dst))
        cfg = {
            "global": {"scrape_interval": self.scrape_interval, "evaluation_interval": self.evaluation_interval,
                       "scrape_timeout": self.scrape_timeout,
                       **({"external_labels": self.external_labels} if self.external_labels else {})},
            "rule_files": rules,
            "scrape_configs": [{"job_name": job, "static_configs": [{"targets": list(addrs)}]}
                               for job, addrs in self.targets.items()] + self.more_scrape_configs,
        }
        if self.alertmanagers:
            cfg["alerting"] = {"alertmanagers": [{"static_configs": [{"targets": self.alertmanagers}]}]}
        path = folder / "prometheus.yml"
        path.write_text(yaml.safe_dump(cfg, sort_keys=False))
        return path

    def start(self) -> "LocalPrometheus":
        """Start the server and wait until ``/-/ready`` answers 200.

        Raises:
            RuntimeError: the process exited or did not become ready in time (its log is included).
        """
        folder = self._folder()
        config = self._config(folder)
        self._spawn([self.binary or prometheus_binary(), f"--config.file={config}",
                     f"--storage.tsdb.path={folder / 'data'}", f"--web.listen-address=127.0.0.1:{self.port}",
                     "--web.enable-lifecycle", "--storage.tsdb.retention.time=1d", *self.extra_args])
        return self

    def settle(self, timeout: float = 30) -> bool:
        """Wait until every rule group has evaluated at least once after now (Prometheus' clock).

        A check that "nothing fires" is only sound once each group has seen the current data: the
        scrape manager starts scraping up to 5 s after the rule manager starts (its reload ticker),
        so with a test-sized ``for`` an ``absent(up)`` alert fires before the first scrape, and its
        ALERTS series lasts until its own group evaluates again, even when other groups already
        see a healthy fleet. Returns False if some group did not evaluate within ``timeout``.
        """
        since = self.server_time()
        def evaluated() -> bool:
            resp = httpx.get(f"{self.url}/api/v1/rules", timeout=10)
            resp.raise_for_status()
            groups = resp.json()["data"]["groups"]
            return all(rfc3339_seconds(g.get("lastEvaluation", "")) > since for g in groups)
        return wait_for(evaluated, timeout, 0.2)

    def server_time(self) -> float:
        """The server's clock, in Unix seconds (an instant query of ``time()``)."""
        resp = httpx.get(f"{self.url}/api/v1/query", params={"query": "time()"}, timeout=10)
        resp.raise_for_status()
        return float(resp.json()["data"]["result"][0])

    def reload(self) -> None:
        """Ask the server to re-read its config and rules (``POST /-/reload``)."""
        httpx.post(f"{self.url}/-/reload", timeout=10).raise_for_status()

    def retarget(self, targets: dict[str, list[str]]) -> None:
        """Scrape ``targets`` ({job: [host:port]}) from now on: rewrite the config and reload.
        Targets no longer listed get staleness markers, as when service discovery drops them."""
        self.targets = targets
        self._config(Path(self.tmp.name))
        self.reload()


class LocalVictoriaMetrics(_QueryServer):
    """A real single-node VictoriaMetrics (Debian's ``victoria-metrics``) on 127.0.0.1, optionally
    scraping ``targets`` itself (``-promscrape.config``).

    Args:
        targets: {job name: [host:port, ...]}; empty: data arrives by remote write only.
        scrape_interval: the scrape config's interval (its timeout is the same).
        extra_args: more flags (``-search.disableCache`` for tests that write the past and read it back).
    Flags always set: ``-search.latencyOffset=0s`` (answer with samples up to now, not 30 s ago:
    tests read what was scraped a second ago) and a retention long enough for replays of the past.
    """

    NAME = "victoria-metrics"
    READY = "/health"

    def __init__(self, targets: dict[str, list[str]] | None = None, scrape_interval: str = "1s",
                 extra_args: list[str] = (), startup_timeout: float = 60, binary: str = "victoria-metrics"):
        self.targets, self.scrape_interval = dict(targets or {}), scrape_interval
        self.extra_args, self.binary = list(extra_args), binary
        super().__init__(startup_timeout)

    def start(self) -> "LocalVictoriaMetrics":
        """Start the server and wait until ``/health`` answers 200 (RuntimeError with its log if not)."""
        folder = self._folder()
        args = [self.binary, f"-httpListenAddr=127.0.0.1:{self.port}", f"-storageDataPath={folder / 'data'}",
                "-search.latencyOffset=0s", "-retentionPeriod=1y"]
        if self.targets:
            self._write_scrape_config()
            args.append(f"-promscrape.config={folder / 'scrape.yml'}")
        self._spawn(args + self.extra_args)
        return self

    def _write_scrape_config(self) -> None:
        (Path(self.tmp.name) / "scrape.yml").write_text(yaml.safe_dump({
            "global": {"scrape_interval": self.scrape_interval, "scrape_timeout": self.scrape_interval},
            "scrape_configs": [{"job_name": job, "static_configs": [{"targets": list(addrs)}]}
                               for job, addrs in self.targets.items()]}, sort_keys=False))

    def retarget(self, targets: dict[str, list[str]]) -> None:
        """Scrape ``targets`` ({job: [host:port]}) from now on (a server started with targets): rewrite
        the scrape config and send SIGHUP, on which VictoriaMetrics re-reads it. Targets no longer
        listed get staleness markers, as when service discovery drops them."""
        assert self.targets and self.proc, "retarget needs a server started with targets"
        self.targets = dict(targets)
        self._write_scrape_config()
        self.proc.send_signal(signal.SIGHUP)


class LocalVmalert(_LocalServer):
    """A real ``vmalert`` on 127.0.0.1 evaluating ``rule_files`` against ``datasource`` (a
    VictoriaMetrics URL) and writing recording rules and ``ALERTS`` back there by remote write.

    Args:
        notifier: Alertmanager (or webhook) base URL alerts are sent to (vmalert requires one), or
            a list of them (each gets every alert, as an Alertmanager HA pair would).
        evaluation_interval: ``-evaluationInterval`` (groups without their own interval).
        binary: the vmalert binary (default ``vmalert`` on PATH: Debian's).
    """

    NAME = "vmalert"
    READY = "/health"

    def __init__(self, rule_files: list[str | Path], datasource: str, notifier: "str | list[str]",
                 evaluation_interval: str = "1s", extra_args: list[str] = (), startup_timeout: float = 60,
                 binary: str = "vmalert"):
        self.rule_files, self.datasource = [Path(p) for p in rule_files], datasource
        self.notifiers = [notifier] if isinstance(notifier, str) else list(notifier)
        self.evaluation_interval, self.extra_args, self.binary = evaluation_interval, list(extra_args), binary
        super().__init__(startup_timeout)

    def start(self) -> "LocalVmalert":
        """Start vmalert and wait until ``/health`` answers 200 (RuntimeError with its log if not)."""
        self._folder()
        self._spawn([self.binary, *[f"-rule={p}" for p in self.rule_files], f"-datasource.url={self.datasource}",
                     f"-remoteWrite.url={self.datasource}", "-remoteWrite.flushInterval=1s",
                     f"-evaluationInterval={self.evaluation_interval}",
                     *[f"-notifier.url={n.rstrip('/')}" for n in self.notifiers],
                     f"-httpListenAddr=127.0.0.1:{self.port}", *self.extra_args])
        return self

    def alerts(self) -> list[dict]:
        """The alerts vmalert holds now (``/api/v1/alerts``; vmalert 1.79 says ``null`` for none)."""
        resp = httpx.get(f"{self.url}/api/v1/alerts", timeout=5)
        resp.raise_for_status()
        return resp.json()["data"]["alerts"] or []


class LocalAlertmanager(_LocalServer):
    """A real Alertmanager on 127.0.0.1 with ``config`` (a dict), clustering off; waits on
    ``/-/ready`` and stops by PID. ``binary``: default ``$GPUMON_ALERTMANAGER``, else Debian's
    ``prometheus-alertmanager`` or ``alertmanager`` on PATH."""

    NAME = "alertmanager"

    def __init__(self, config: dict, startup_timeout: float = 30, binary: str | None = None):
        self.config, self.binary = config, binary
        super().__init__(startup_timeout)

    def start(self) -> "LocalAlertmanager":
        # Debian installs it as prometheus-alertmanager; upstream tarballs as alertmanager
        binary = self.binary or os.environ.get("GPUMON_ALERTMANAGER") or shutil.which("prometheus-alertmanager") \
            or shutil.which("alertmanager")
        if not binary:
            raise FileNotFoundError("alertmanager not found: apt-get install --no-install-recommends prometheus-alertmanager")
        folder = self._folder()
        (folder / "alertmanager.yml").write_text(yaml.safe_dump(self.config, sort_keys=False))
        self._spawn([binary, f"--config.file={folder / 'alertmanager.yml'}", f"--storage.path={folder / 'data'}",
                     f"--web.listen-address=127.0.0.1:{self.port}", "--cluster.listen-address="])
        return self

    def alerts(self) -> list[dict]:
        """``GET /api/v2/alerts``: every alert it holds, with ``status.state`` (active/suppressed)."""
        resp = httpx.get(f"{self.url}/api/v2/alerts", timeout=10)
        resp.raise_for_status()
        return resp.json()

"""A team MLflow tracking server in one command: PostgreSQL, the schema, the server, the
experiments.

    python -m experiments.ops.team_server start [--experiment NAME ...] [--users FILE]
    python -m experiments.ops.team_server status
    python -m experiments.ops.team_server stop

``start`` starts a local PostgreSQL (``initdb`` once, then ``pg_ctl``, listening on loopback
only), unless ``--backend-store-uri`` names an existing database; creates MLflow's schema once
(``mlflow db upgrade``) so that no job races another on first use; starts ``mlflow server``
with an artifact proxy (``--serve-artifacts``: artifacts go through the server to
``--artifacts-destination``) and MLflow's basic-auth app; and creates the experiments a sweep
will log to, tagged so that the UI opens on their runs table.

Credentials never live in the repository: the admin (and other users) come from ``--users
FILE`` (``name:password`` lines, the first is the admin) or from ``MLFLOW_TRACKING_USERNAME``
and ``MLFLOW_TRACKING_PASSWORD``, the variables the harness sends them with. The server binds
to 127.0.0.1 unless ``--host`` says otherwise, and refuses to serve beyond loopback without
authentication. State (PostgreSQL data, logs, pids) lives in ``--state-dir`` (default
``~/.local/state/smartvector-team``); as root, PostgreSQL runs as the ``postgres`` user with
its data under that user's home.
"""

from __future__ import annotations

import argparse
import hashlib
import ipaddress
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit, urlunsplit

from experiments.ops.resilience import auth_problem, one_line, process_alive, process_start
from experiments.results.mlflow_export import get_or_create_experiment, ui_url, with_pg_driver

ROOT = Path(__file__).resolve().parents[2]
STATE_FILE = "server.json"
PG_USER = "mlflow"
PG_DB = "mlflow"
DEFAULT_EXPERIMENTS = ("headline",)


class TeamServerError(RuntimeError):
    """A problem to report in one line (exit code 2)."""


@dataclass
class Credentials:
    admin: tuple[str, str]
    users: list[tuple[str, str]]


# --- small helpers --------------------------------------------------------------------------


def default_state_dir() -> Path:
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "smartvector-team"


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def port_free(host: str, port: int) -> bool:
    """True if ``host:port`` can be bound right now."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as servers do: TIME_WAIT
        try:                                                     # is not "in use"
            s.bind((host, port))
        except OSError:
            return False
    return True


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def mask(uri: str) -> str:
    """A URI with its password replaced by ``***``."""
    parts = urlsplit(uri)
    if parts.password is None:
        return uri
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
    return urlunsplit(parts._replace(netloc=netloc))


def _private_file(path: Path, text: str) -> None:
    """Write a file only its owner can read."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text)


def _inside_repo(path: Path) -> bool:
    try:
        path.resolve().relative_to(ROOT)
    except ValueError:
        return False
    return True


def read_credentials(users_file: Path | None, env: Mapping[str, str]) -> Credentials:
    """The admin and other users from ``users_file`` (``name:password`` lines, ``#``
    comments; the first is the admin) or from ``MLFLOW_TRACKING_USERNAME/PASSWORD``."""
    pairs: list[tuple[str, str]] = []
    if users_file is not None:
        if _inside_repo(users_file):
            raise TeamServerError(f"{users_file} is inside the repository: keep credentials "
                                  "outside it (e.g. ~/.config/smartvector/users)")
        try:
            lines = users_file.read_text(encoding="utf-8").splitlines()
        except OSError as e:
            raise TeamServerError(f"cannot read {users_file}: {e.strerror}") from None
        for n, line in enumerate(lines, 1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            name, sep, password = line.partition(":")
            if not sep or not name.strip() or not password:
                raise TeamServerError(f"{users_file}:{n}: expected name:password")
            pairs.append((name.strip(), password))
        if not pairs:
            raise TeamServerError(f"{users_file}: no name:password line")
    else:
        name = env.get("MLFLOW_TRACKING_USERNAME", "")
        password = env.get("MLFLOW_TRACKING_PASSWORD", "")
        if not name or not password:
            raise TeamServerError(
                "a team server needs credentials: pass --users FILE (name:password lines, the "
                "first is the admin) or set MLFLOW_TRACKING_USERNAME and "
                "MLFLOW_TRACKING_PASSWORD (or --no-auth for a loopback-only server)")
        pairs.append((name, password))
    for name, password in pairs:
        if len(password) < 12:
            raise TeamServerError(f"the password of user {name!r} is too short: MLflow's "
                                  "basic-auth needs at least 12 characters")
    return Credentials(pairs[0], pairs[1:])


# --- PostgreSQL -----------------------------------------------------------------------------


def pg_bindir() -> Path:
    """The directory holding ``initdb`` and ``pg_ctl`` (PATH, else Debian's layout)."""
    found = shutil.which("pg_ctl")
    if found and shutil.which("initdb"):
        return Path(found).parent
    candidates = sorted(Path("/usr/lib/postgresql").glob("*/bin/pg_ctl"),
                        key=lambda p: int(p.parts[-3]) if p.parts[-3].isdigit() else 0)
    if candidates:
        return candidates[-1].parent
    raise TeamServerError("PostgreSQL is not installed (Debian: apt-get install postgresql); "
                          "or pass --backend-store-uri for an existing database")


class LocalPostgres:
    """A private PostgreSQL cluster on loopback, run as the invoking user, or as ``postgres``
    when invoked as root (PostgreSQL refuses to run as root)."""

    def __init__(self, data_dir: Path, port: int, password: str) -> None:
        self.data_dir, self.port, self.password = data_dir, port, password
        self.bindir = pg_bindir()
        self.as_root = os.geteuid() == 0
        if self.as_root:
            import pwd

            try:
                self.owner = pwd.getpwnam("postgres")
            except KeyError:
                raise TeamServerError("running as root needs the 'postgres' system user "
                                      "(installed with Debian's postgresql package)") from None

    @property
    def log_file(self) -> Path:
        return self.data_dir / "postgres.log"

    def uri(self) -> str:
        pw = quote(self.password, safe="")
        return f"postgresql+psycopg2://{PG_USER}:{pw}@127.0.0.1:{self.port}/{PG_DB}"

    def _cmd(self, *args: str) -> list[str]:
        return (["runuser", "-u", "postgres", "--"] if self.as_root else []) + list(args)

    def _run(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
        return subprocess.run(self._cmd(*args), capture_output=True, text=True,
                              timeout=timeout, check=False, cwd="/")

    def _own(self, path: Path) -> None:
        if self.as_root:
            os.chown(path, self.owner.pw_uid, self.owner.pw_gid)

    def version(self) -> str:
        try:
            return (self.data_dir / "PG_VERSION").read_text().strip()
        except OSError:
            return "?"

    def initialised(self) -> bool:
        return (self.data_dir / "PG_VERSION").is_file()

    def init(self) -> None:
        """``initdb`` with a password-protected superuser ``mlflow`` (scram-sha-256)."""
        self.data_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        os.chmod(self.data_dir, 0o700)
        self._own(self.data_dir)
        with tempfile.TemporaryDirectory(prefix="smartvector-initdb-") as tmp:
            self._own(Path(tmp))  # private to the user that runs initdb
            pwfile = Path(tmp) / "pw"
            _private_file(pwfile, self.password + "\n")
            self._own(pwfile)
            res = self._run(str(self.bindir / "initdb"), "-D", str(self.data_dir),
                            "-U", PG_USER, f"--pwfile={pwfile}", "-A", "scram-sha-256",
                            "-E", "UTF8", "--no-instructions")
        if res.returncode != 0:
            lines = (res.stderr or res.stdout).strip().splitlines() or ["(no output)"]
            hint = ""
            if self.as_root and "Permission denied" in res.stderr:
                hint = " (the postgres user cannot reach it: choose --pg-data elsewhere)"
            raise TeamServerError(f"initdb {self.data_dir} failed: {lines[-1]}{hint}")

    def running(self) -> bool:
        res = self._run(str(self.bindir / "pg_ctl"), "-D", str(self.data_dir), "status")
        return res.returncode == 0

    def start(self) -> None:
        if self.running():
            return
        if not port_free("127.0.0.1", self.port):
            raise TeamServerError(f"port {self.port} on 127.0.0.1 is in use (PostgreSQL); "
                                  "choose another with --pg-port")
        opts = (f"-c listen_addresses=127.0.0.1 -p {self.port} "
                "-c unix_socket_directories=''")
        res = self._run(str(self.bindir / "pg_ctl"), "-D", str(self.data_dir), "-l",
                        str(self.log_file), "-w", "-t", "60", "-o", opts, "start")
        if res.returncode != 0:
            tail = self._log_tail() or (res.stderr or res.stdout).strip()
            raise TeamServerError(f"PostgreSQL did not start: {tail} (log: {self.log_file})")

    def stop(self) -> None:
        if self.initialised() and self.running():
            self._run(str(self.bindir / "pg_ctl"), "-D", str(self.data_dir), "-m", "fast",
                      "-w", "stop")

    def _log_tail(self) -> str:
        try:
            lines = self.log_file.read_text(errors="replace").strip().splitlines()
        except OSError:
            return ""
        return lines[-1] if lines else ""

    def ensure_database(self) -> None:
        """Create the ``mlflow`` database if it does not exist."""
        import psycopg2

        try:
            conn = psycopg2.connect(host="127.0.0.1", port=self.port, user=PG_USER,
                                    password=self.password, dbname="postgres",
                                    connect_timeout=10)
        except psycopg2.Error as e:
            raise TeamServerError(f"cannot connect to PostgreSQL on 127.0.0.1:{self.port}: "
                                  f"{one_line(e)}") from None
        try:
            conn.autocommit = True
            with conn.cursor() as cur:
                cur.execute("SELECT 1 FROM pg_database WHERE datname = %s", (PG_DB,))
                if cur.fetchone() is None:
                    cur.execute(f'CREATE DATABASE "{PG_DB}"')
        finally:
            conn.close()


# --- the server -----------------------------------------------------------------------------


def mlflow_command() -> list[str]:
    exe = Path(sys.executable).parent / "mlflow"
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "mlflow"]


def upgrade_schema(uri: str) -> None:
    """Create or upgrade MLflow's tables once, before any server worker or job opens them."""
    try:
        res = subprocess.run([*mlflow_command(), "db", "upgrade", uri], capture_output=True,
                             text=True, timeout=600, check=False)
    except subprocess.TimeoutExpired:
        raise TeamServerError(f"mlflow db upgrade {mask(uri)} took over 10 minutes") from None
    if res.returncode != 0:
        lines = [ln for ln in res.stderr.strip().splitlines() if ln.strip()] or ["(no output)"]
        raise TeamServerError(f"mlflow db upgrade {mask(uri)} failed: {lines[-1]}")


def health(url: str, timeout: float = 3.0) -> bool:
    try:
        with urllib.request.urlopen(url.rstrip("/") + "/health", timeout=timeout) as r:
            return r.status == 200
    except (urllib.error.URLError, OSError, ValueError):
        return False


def wait_healthy(url: str, proc: subprocess.Popen, log: Path, timeout: float = 120) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        if health(url):
            return
        if proc.poll() is not None:
            raise TeamServerError(f"mlflow server exited with code {proc.returncode}: "
                                  f"{_last_error(log)} (log: {log})")
        time.sleep(0.5)
    raise TeamServerError(f"mlflow server did not answer on {url} within {timeout:.0f} s "
                          f"(log: {log})")


def _last_error(log: Path) -> str:
    try:
        lines = [ln for ln in log.read_text(errors="replace").splitlines() if ln.strip()]
    except OSError:
        return "(no log)"
    errors = [ln for ln in lines if "Error" in ln or "error" in ln]
    return (errors or lines or ["(empty log)"])[-1].strip()


def auth_config(state: Path, default_permission: str) -> Path:
    """MLflow's basic-auth config (no password in it: the admin comes from the environment
    the first time, then from the auth database)."""
    path = state / "basic_auth.ini"
    _private_file(path, "[mlflow]\n"
                        f"default_permission = {default_permission}\n"
                        f"database_uri = sqlite:///{state / 'basic_auth.db'}\n"
                        "authorization_function = "
                        "mlflow.server.auth:authenticate_request_basic_auth\n"
                        # each request would otherwise pay a PBKDF2 check (~0.3 s on 2 cores);
                        # a changed password reaches the other workers within a minute
                        "auth_cache_ttl_seconds = 60\n")
    return path


def _client_env(creds: Credentials | None) -> dict[str, str]:
    if creds is None:
        return {}
    return {"MLFLOW_TRACKING_USERNAME": creds.admin[0],
            "MLFLOW_TRACKING_PASSWORD": creds.admin[1]}


class _env:  # noqa: N801 - used as a context manager
    """Temporarily set environment variables."""

    def __init__(self, values: Mapping[str, str]) -> None:
        self.values, self.saved = dict(values), {}

    def __enter__(self) -> None:
        for k, v in self.values.items():
            self.saved[k] = os.environ.get(k)
            os.environ[k] = v

    def __exit__(self, *exc: object) -> None:
        for k, v in self.saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def create_users(url: str, creds: Credentials) -> list[str]:
    """Create the users of the users file that do not exist yet; returns their names."""
    from mlflow.server.auth.client import AuthServiceClient

    created = []
    with _env(_client_env(creds)):
        client = AuthServiceClient(url)
        for name, password in creds.users:
            try:
                client.get_user(name)
                continue
            except Exception:  # noqa: BLE001 - RESOURCE_DOES_NOT_EXIST: create it below
                pass
            client.create_user(name, password)
            created.append(name)
    return created


def create_experiments(url: str, names: list[str], creds: Credentials | None) -> list[str]:
    """Create (or tag) the experiments before any job starts; returns their ids."""
    from mlflow import MlflowClient

    ids = []
    with _env(_client_env(creds)):
        client = MlflowClient(url)
        for name in names:
            exp = get_or_create_experiment(client, name, None)
            if exp.lifecycle_stage == "deleted":
                raise TeamServerError(f"experiment {name!r} is deleted; restore it (mlflow "
                                      f"experiments restore --experiment-id "
                                      f"{exp.experiment_id})")
            ids.append(exp.experiment_id)
    return ids


# --- commands -------------------------------------------------------------------------------


def _load_state(state: Path) -> dict[str, Any]:
    try:
        return json.loads((state / STATE_FILE).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return {}


def _save_state(state: Path, data: Mapping[str, Any]) -> None:
    _private_file(state / STATE_FILE, json.dumps(data, indent=2, sort_keys=True) + "\n")


def _server_alive(info: Mapping[str, Any]) -> bool:
    pid = info.get("server_pid")
    return bool(pid) and process_alive(int(pid), info.get("server_pid_start", ""))


def _local_pg(info: Mapping[str, Any], state: Path) -> LocalPostgres | None:
    pg = info.get("postgres")
    if not pg:
        return None
    password = (state / "pg_password").read_text(encoding="utf-8").strip()
    return LocalPostgres(Path(pg["data_dir"]), int(pg["port"]), password)


def default_pg_data(state: Path) -> Path:
    """Where a local cluster keeps its data: in the state dir, or as root (PostgreSQL runs as
    ``postgres``, who cannot enter /root) under the postgres user's home."""
    if os.geteuid() != 0:
        return state / "pgdata"
    import pwd

    try:
        home = Path(pwd.getpwnam("postgres").pw_dir)
    except KeyError:
        raise TeamServerError("running as root needs the 'postgres' system user (installed "
                              "with Debian's postgresql package)") from None
    tag = hashlib.sha256(str(state.resolve()).encode()).hexdigest()[:10]
    return home / f"smartvector-team-{tag}"


def start(args: argparse.Namespace) -> int:
    state: Path = args.state_dir.resolve()
    host: str = args.host
    if not args.auth and not is_loopback(host):
        raise TeamServerError(f"refusing to serve on {host} without authentication: drop "
                              "--no-auth (users from --users FILE or MLFLOW_TRACKING_*)")
    creds = read_credentials(args.users, os.environ) if args.auth else None
    state.mkdir(parents=True, exist_ok=True, mode=0o700)
    os.chmod(state, 0o700)
    info = _load_state(state)
    if _server_alive(info):
        print(f"team server already running: {info['url']} (pid {info['server_pid']}); stop "
              f"it with: python -m experiments.ops.team_server stop --state-dir {state}")
        return 0
    port = args.port
    if not port_free(host, port):
        raise TeamServerError(f"port {port} on {host} is in use: choose another with --port")

    pg: LocalPostgres | None = None
    started_pg = False
    if args.backend_store_uri:
        uri = with_pg_driver(args.backend_store_uri)
        info.pop("postgres", None)  # `stop` must not touch a database it did not start
    else:
        pw_file = state / "pg_password"
        if not pw_file.exists():
            _private_file(pw_file, secrets.token_urlsafe(24) + "\n")
        old = info.get("postgres") or {}
        data_dir = (args.pg_data or (Path(old["data_dir"]) if old.get("data_dir") else None)
                    or default_pg_data(state)).resolve()
        pg_port = args.pg_port or int(old.get("port") or 0) or free_port()
        pg = LocalPostgres(data_dir, pg_port, pw_file.read_text(encoding="utf-8").strip())
        if not pg.initialised():
            pg.init()
        started_pg = not pg.running()
        pg.start()
        info["postgres"] = {"data_dir": str(data_dir), "port": pg_port,
                            "log": str(pg.log_file)}
        _save_state(state, info)
        uri = pg.uri()
    try:
        if pg is not None:
            pg.ensure_database()
        return _start_server(args, state, info, uri, pg, creds)
    except BaseException:
        if pg is not None and started_pg:
            pg.stop()
        raise


def _start_server(args: argparse.Namespace, state: Path, info: dict[str, Any], uri: str,
                  pg: LocalPostgres | None, creds: Credentials | None) -> int:
    host, port = args.host, args.port
    probe_host = "127.0.0.1" if host in ("0.0.0.0", "::", "") else host
    upgrade_schema(uri)

    artifacts = args.artifacts_destination or str(state / "artifacts")
    if "://" not in artifacts:
        Path(artifacts).mkdir(parents=True, exist_ok=True)
        artifacts = str(Path(artifacts).resolve())
    url = f"http://{probe_host if ':' not in probe_host else f'[{probe_host}]'}:{port}"
    cmd = [*mlflow_command(), "server", "--backend-store-uri", uri, "--serve-artifacts",
           "--artifacts-destination", artifacts, "--host", host, "--port", str(port),
           "--workers", str(args.workers)]
    if args.allowed_hosts:
        cmd += ["--allowed-hosts", args.allowed_hosts]
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("MLFLOW_TRACKING_", "MLFLOW_AUTH_"))}
    # MLflow's GenAI job runner (scorers, trace archival) is not used and slows start-up
    env.setdefault("MLFLOW_SERVER_ENABLE_JOB_EXECUTION", "false")
    if creds is not None:
        cmd += ["--app-name", "basic-auth"]
        env["MLFLOW_AUTH_CONFIG_PATH"] = str(auth_config(state, args.default_permission))
        env["MLFLOW_AUTH_ADMIN_USERNAME"], env["MLFLOW_AUTH_ADMIN_PASSWORD"] = creds.admin
        env.setdefault("MLFLOW_FLASK_SERVER_SECRET_KEY", secrets.token_hex(32))
    log = state / "mlflow-server.log"
    with open(log, "ab") as out:
        proc = subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True, cwd=state)
    info.update({"url": url, "host": host, "port": port, "server_pid": proc.pid,
                 "server_pid_start": process_start(proc.pid), "auth": creds is not None,
                 "backend_store_uri": mask(uri), "artifacts_destination": artifacts,
                 "log": str(log)})
    _save_state(state, info)
    try:
        wait_healthy(url, proc, log, timeout=args.timeout)
        try:
            users = create_users(url, creds) if creds is not None and creds.users else []
            ids = create_experiments(url, list(args.experiment or DEFAULT_EXPERIMENTS), creds)
        except TeamServerError:
            raise
        except Exception as e:  # noqa: BLE001 - e.g. an admin password changed since
            with _env(_client_env(creds)):
                reason = auth_problem(e, url) or one_line(e)
            raise TeamServerError(f"cannot set up users and experiments: {reason}") from None
    except BaseException:
        _stop_server(info)
        raise
    where = (f"PostgreSQL {pg.version()} on 127.0.0.1:{pg.port} (data {pg.data_dir})"
             if pg else mask(uri))
    print(f"team server: {url} ({'basic-auth' if creds else 'NO authentication'}; "
          f"store {where}; artifacts {artifacts})")
    names = list(args.experiment or DEFAULT_EXPERIMENTS)
    if users:
        print(f"users created: {', '.join(users)}")
    for name, exp_id in zip(names, ids, strict=True):
        print(f"experiment {name}: {ui_url(url, exp_id)}")
    who = (" MLFLOW_TRACKING_USERNAME=... MLFLOW_TRACKING_PASSWORD=..." if creds else "")
    print(f"log to it: export MLFLOW_TRACKING_URI={url}{who}")
    print(f"stop it:   python -m experiments.ops.team_server stop --state-dir {state}")
    return 0


def _stop_server(info: Mapping[str, Any], timeout: float = 20) -> bool:
    """SIGTERM the server's process group (SIGKILL after ``timeout``); True if it was up."""
    if not _server_alive(info):
        return False
    pid = int(info["server_pid"])
    try:
        os.killpg(pid, signal.SIGTERM)
    except ProcessLookupError:
        return False
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            os.killpg(pid, 0)
        except ProcessLookupError:
            break
        try:
            os.waitpid(pid, os.WNOHANG)  # reap it when we started it in this process
        except ChildProcessError:
            pass
        time.sleep(0.2)
    else:
        try:
            os.killpg(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return True


def stop(args: argparse.Namespace) -> int:
    state: Path = args.state_dir.resolve()
    info = _load_state(state)
    if not info:
        print(f"no team server state in {state}")
        return 0
    was_up = _stop_server(info)
    pg = _local_pg(info, state)
    if pg is not None:
        pg.stop()
    for key in ("server_pid", "server_pid_start"):
        info.pop(key, None)
    _save_state(state, info)
    print(f"stopped: {'mlflow server' if was_up else 'mlflow server (was not running)'}"
          + (f", PostgreSQL ({pg.data_dir})" if pg else ""))
    return 0


def status(args: argparse.Namespace) -> int:
    state: Path = args.state_dir.resolve()
    info = _load_state(state)
    if not info.get("url"):
        print(f"no team server in {state}")
        return 3
    up = _server_alive(info) and health(info["url"])
    print(f"mlflow server: {info['url']} {'up' if up else 'DOWN'} "
          f"({'basic-auth' if info.get('auth') else 'no authentication'}; log {info['log']})")
    print(f"store: {info['backend_store_uri']}; artifacts: {info['artifacts_destination']}")
    pg = _local_pg(info, state)
    if pg is not None:
        print(f"PostgreSQL: 127.0.0.1:{pg.port} {'up' if pg.running() else 'DOWN'} "
              f"(data {pg.data_dir})")
    return 0 if up else 3


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m experiments.ops.team_server",
                                description="A shared MLflow tracking server on PostgreSQL.")
    p.add_argument("--state-dir", type=Path, default=default_state_dir(),
                   help="PostgreSQL data, logs and pids (default: %(default)s)")
    sub = p.add_subparsers(dest="command", required=True)
    s = sub.add_parser("start", help="start PostgreSQL (if local) and mlflow server")
    s.add_argument("--host", default="127.0.0.1",
                   help="interface to serve on (default: loopback only)")
    s.add_argument("--port", type=int, default=5000)
    s.add_argument("--backend-store-uri",
                   help="an existing database (postgresql://USER:PW@HOST/DB); default: a "
                        "local PostgreSQL started here")
    s.add_argument("--pg-port", type=int, default=0,
                   help="port of the local PostgreSQL (default: a free one, then kept)")
    s.add_argument("--pg-data", type=Path, help="data directory of the local PostgreSQL")
    s.add_argument("--artifacts-destination",
                   help="where the server stores artifacts (a directory or s3://...; default: "
                        "STATE_DIR/artifacts)")
    s.add_argument("--experiment", action="append",
                   help="experiment to create before sweeps start (repeatable; default: "
                        "headline)")
    s.add_argument("--users", type=Path,
                   help="file of name:password lines, the first is the admin (default: "
                        "MLFLOW_TRACKING_USERNAME/PASSWORD as the admin)")
    s.add_argument("--no-auth", dest="auth", action="store_false",
                   help="no login (only on a loopback address)")
    s.add_argument("--default-permission", default="EDIT",
                   choices=["READ", "EDIT", "MANAGE", "NO_PERMISSIONS"],
                   help="what users may do on experiments they did not create")
    s.add_argument("--allowed-hosts", help="Host headers to accept (mlflow server's option)")
    s.add_argument("--workers", type=int, default=2, help="server worker processes")
    s.add_argument("--timeout", type=float, default=120, help="seconds to wait for the server")
    sub.add_parser("stop", help="stop mlflow server and the local PostgreSQL")
    sub.add_parser("status", help="say what runs where (exit code 3 if the server is down)")
    return p


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        return {"start": start, "stop": stop, "status": status}[args.command](args)
    except TeamServerError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())

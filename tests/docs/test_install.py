"""jocko-py installs without a checkout: `make dist`'s sdist builds a wheel, the wheel
installs into a fresh virtualenv in a directory of its own, and from there `jocko-py`
runs a broker, produces and consumes, and pytest finds the plugin's fixtures; with the
C extension removed (as where no compiler exists) the pure-Python path serves too."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

from tests.support.broker import REPO, free_port, wait_for_port

QUIET = dict(os.environ, PYTHONWARNINGS="ignore", PIP_DISABLE_PIP_VERSION_CHECK="1")


def _run(argv: list[str], cwd: Path, timeout: float = 300, **kw: object) -> str:
    r = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=timeout,
                       env=QUIET, **kw)  # type: ignore[call-overload]
    assert r.returncode == 0, f"{argv}: {r.stdout}\n{r.stderr}"
    return str(r.stdout)


def _produce_consume(jocko: Path, cwd: Path, tag: str) -> None:
    port = free_port()
    log = open(cwd / f"broker-{tag}.log", "wb")
    proc = subprocess.Popen([str(jocko), "broker", "--broker-addr", f"127.0.0.1:{port}",
                             "--data-dir", str(cwd / f"data-{tag}")], cwd=cwd, stdout=log,
                            stderr=subprocess.STDOUT)
    log.close()
    try:
        wait_for_port("127.0.0.1", port, 30)
        boot = ["--bootstrap-server", f"127.0.0.1:{port}"]
        _run([str(jocko), "produce", "t", "--key-separator", "=", *boot], cwd,
             input="k=v\n")
        out = _run([str(jocko), "consume", "t", "--print-key", *boot], cwd)
        assert out == "k\tv\n"
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0


def test_wheel_installs_in_a_fresh_venv_and_runs_broker_cli_and_plugin(tmp_path: Path) -> None:
    dist = tmp_path / "dist"
    _run([sys.executable, "-m", "build", "--sdist", "--outdir", str(dist), str(REPO)], tmp_path)
    sdist = next(dist.glob("jocko_py-*.tar.gz"))
    _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(dist),
          str(sdist)], tmp_path)
    wheel = next(dist.glob("jocko_py-*.whl"))
    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", str(venv)], tmp_path)
    _run([str(venv / "bin" / "pip"), "install", "-q", str(wheel), "pytest"], tmp_path)
    work = tmp_path / "elsewhere"
    work.mkdir()
    py = venv / "bin" / "python"
    # installed, not imported from the checkout
    where = _run([str(py), "-c", "import jocko_py, jocko_py.protocol._recwalk as r; "
                  "print(jocko_py.__file__)"], work)
    assert str(venv) in where and str(REPO) not in where
    _produce_consume(venv / "bin" / "jocko-py", work, "native")
    # the plugin: a user's test gets a broker from the kafka_bootstrap fixture
    (work / "test_app.py").write_text(textwrap.dedent("""
        from jocko_py.client import Client

        def test_round_trip(kafka_bootstrap):
            with Client(kafka_bootstrap) as c:
                c.create_topic("app")
                assert "app" in [t.name for t in c.metadata(["app"]).topics]
    """))
    out = _run([str(venv / "bin" / "pytest"), "-q", "-p", "no:cacheprovider", "test_app.py"],
               work)
    assert "1 passed" in out
    # no compiler: the wheel's extension gone, the pure-Python record walk serves
    for so in (venv / "lib").glob("python*/site-packages/jocko_py/protocol/_recwalk*.so"):
        so.unlink()
    _run([str(py), "-c", "from jocko_py.protocol import records as r; "
          "assert r.walk_records_native is None"], work)
    _produce_consume(venv / "bin" / "jocko-py", work, "pure")


def test_pipx_installs_the_wheel_as_an_application(tmp_path: Path) -> None:
    """`pipx install` of the wheel (the README's third way) gives a `jocko-py` on pipx's
    bin directory that runs a broker, produces and consumes."""
    dist = tmp_path / "dist"
    _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(dist), str(REPO)],
         tmp_path)
    wheel = next(dist.glob("jocko_py-*.whl"))
    home, bin_dir = tmp_path / "pipx-home", tmp_path / "pipx-bin"
    env = dict(QUIET, PIPX_HOME=str(home), PIPX_BIN_DIR=str(bin_dir),
               PIPX_MAN_DIR=str(tmp_path / "pipx-man"))
    r = subprocess.run([sys.executable, "-m", "pipx", "install", str(wheel)], cwd=tmp_path,
                       capture_output=True, text=True, timeout=300, env=env)
    assert r.returncode == 0, f"pipx install: {r.stdout}\n{r.stderr}"
    jocko = bin_dir / "jocko-py"
    assert jocko.exists(), sorted(p.name for p in bin_dir.iterdir())
    assert str(home) in str(jocko.resolve())
    work = tmp_path / "elsewhere"
    work.mkdir()
    _produce_consume(jocko, work, "pipx")

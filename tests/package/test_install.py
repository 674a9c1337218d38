"""The packages as a user gets them: the wheel and the npm tarballs scripts/package-test.sh built
from this checkout, installed offline into a fresh venv and a fresh npm project, and driven
from the installed copies only (never target/): the example suite replayed, the OpenAI Python
SDK and the OpenAI Node SDK through `cassette exec` against a fake upstream, a miss's exit 2 and
its explanation through `python -m cassette_cli` and through the npm command, signals through
it, and the errors a broken install gives. The npm command is checked both ways it is
installed: with scripts, where the postinstall step put the binary itself in place of the
JavaScript shim, and with --ignore-scripts, where the shim runs it.

Inputs (scripts/package-test.sh sets them): CASSETTE_WHEEL_DIR holding one
`cassette_cli-*.whl`, CASSETTE_NPM_DIR holding `cassette-cli-*.tgz` and
`cassette-cli-linux-x64-*.tgz`.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import tarfile
import textwrap
import time
import tomllib
import urllib.request
import zipfile
from pathlib import Path

import pytest
from sdk_fakes import FakeUpstream

ROOT = Path(__file__).resolve().parents[2]
VERSION = tomllib.loads((ROOT / "Cargo.toml").read_text())["workspace"]["package"]["version"]
SUITE = ["run", "examples/suite/suite.jsonl", "--store", "file://examples/suite/cassettes"]
STALE = ["run", "examples/triage/stale.jsonl", "--store", "file://examples/triage/cassettes"]


def clean_env(**extra: str) -> dict[str, str]:
    """The caller's environment without anything that would point cassette elsewhere."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(
            (
                "CASSETTE_",
                "UPSTREAM_",
                "OPENAI_",
                "ANTHROPIC_",
                "GEMINI_",
                "GOOGLE_",
                "PYTHON",
                "VIRTUAL_ENV",
                "NODE_",
                "npm_",
            )
        )
    }
    env.update(extra)
    return env


def run(
    args: list, expect: int | None = 0, cwd: Path = ROOT, env: dict | None = None, timeout: float = 120
) -> subprocess.CompletedProcess:
    result = subprocess.run(
        [str(a) for a in args],
        check=False,
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=cwd,
        env=env if env is not None else clean_env(),
    )
    if expect is not None:
        assert result.returncode == expect, (
            f"{args}: exit {result.returncode}, expected {expect}\nstdout:\n{result.stdout}\nstderr:\n{result.stderr}"
        )
    return result


def artifact_dir(variable: str) -> Path:
    value = os.environ.get(variable)
    if not value or not Path(value).is_dir():
        pytest.fail(f"{variable} must name the folder of the built packages: run scripts/package-test.sh")
    return Path(value)


# ---------------------------------------------------------------------------------------------
# The artifacts themselves


@pytest.fixture(scope="session")
def wheel() -> Path:
    wheels = sorted(artifact_dir("CASSETTE_WHEEL_DIR").glob("cassette_cli-*.whl"))
    assert len(wheels) == 1, f"expected one cassette_cli wheel, found {wheels}"
    return wheels[0]


@pytest.fixture(scope="session")
def tarballs() -> dict[str, Path]:
    folder = artifact_dir("CASSETTE_NPM_DIR")
    found = {
        "main": folder / f"cassette-cli-{VERSION}.tgz",
        "linux-x64": folder / f"cassette-cli-linux-x64-{VERSION}.tgz",
    }
    for path in found.values():
        assert path.is_file(), f"{path} was not packed; found {sorted(p.name for p in folder.iterdir())}"
    return found


def test_the_wheel_is_one_for_every_python_and_carries_the_binary(wheel):
    # py3-none-<platform>: one wheel for every Python version, a manylinux tag pip accepts.
    name, version, python_tag, abi, platform = wheel.stem.split("-")
    assert (name, version, python_tag, abi) == ("cassette_cli", VERSION, "py3", "none"), wheel.name
    # (A zig build for glibc 2.17 carries both spellings: manylinux2014_x86_64.manylinux_2_17_x86_64.)
    assert any(tag.startswith("manylinux") and tag.endswith("_x86_64") for tag in platform.split(".")), wheel.name
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        binary = f"cassette_cli-{VERSION}.data/scripts/cassette"
        assert binary in names, f"the wheel lacks the binary: {sorted(names)}"
        info = archive.getinfo(binary)
        assert (info.external_attr >> 16) & stat.S_IXUSR, "the binary is not executable in the wheel"
        assert archive.read(binary)[:4] == b"\x7fELF"
        for module in ("__init__.py", "__main__.py", "_find_cassette.py", "py.typed"):
            assert f"cassette_cli/{module}" in names, f"the wheel lacks cassette_cli/{module}"
        metadata = archive.read(f"cassette_cli-{VERSION}.dist-info/METADATA").decode()
    assert "Name: cassette-cli\n" in metadata
    assert f"Version: {VERSION}\n" in metadata
    # Nothing to download or compile at install time: no dependencies.
    assert "Requires-Dist" not in metadata


def test_the_npm_tarballs_hold_the_shim_and_the_binary(tarballs):
    with tarfile.open(tarballs["main"]) as archive:
        members = {m.name: m for m in archive.getmembers()}
        manifest = json.load(archive.extractfile("package/package.json"))
    for path in ("bin/cassette.js", "lib/binary.js", "lib/binary.d.ts", "lib/index.js", "lib/index.d.ts", "install.js"):
        assert f"package/{path}" in members, f"the main package lacks {path}: {sorted(members)}"
    assert members["package/bin/cassette.js"].mode & stat.S_IXUSR
    assert manifest["bin"] == {"cassette": "bin/cassette.js"}
    assert manifest["scripts"] == {"postinstall": "node install.js"}
    # What is packed is always the shim (the postinstall step replaces it only once installed).
    with tarfile.open(tarballs["main"]) as archive:
        assert archive.extractfile("package/bin/cassette.js").read().startswith(b"#!/usr/bin/env node\n")
    assert manifest["version"] == VERSION
    # Every platform package pinned to this very version, so main and binary never disagree.
    assert set(manifest["optionalDependencies"].values()) == {VERSION}
    assert len(manifest["optionalDependencies"]) == 7
    # The binary is only in the platform package.
    assert not [name for name in members if name.endswith("/cassette")], sorted(members)

    with tarfile.open(tarballs["linux-x64"]) as archive:
        members = {m.name: m for m in archive.getmembers()}
        manifest = json.load(archive.extractfile("package/package.json"))
        binary = archive.extractfile("package/bin/cassette").read(4)
    assert binary == b"\x7fELF"
    assert members["package/bin/cassette"].mode & stat.S_IXUSR
    assert (manifest["os"], manifest["cpu"], manifest["libc"]) == (["linux"], ["x64"], ["glibc"])
    assert manifest["version"] == VERSION


# ---------------------------------------------------------------------------------------------
# Python: a fresh venv, the wheel installed with --no-index


@pytest.fixture(scope="session")
def venv(tmp_path_factory, wheel) -> Path:
    path = tmp_path_factory.mktemp("venv") / "venv"
    run([sys.executable, "-m", "venv", path])
    run(
        [path / "bin" / "python", "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-index", wheel]
    )
    return path


@pytest.fixture(scope="session")
def bare_python(tmp_path_factory) -> Path:
    """An interpreter whose own environment has no cassette installed."""
    path = tmp_path_factory.mktemp("bare") / "venv"
    run([sys.executable, "-m", "venv", "--without-pip", path])
    return path / "bin" / "python"


# The two ways a Python user runs it: the binary pip put on the venv's PATH, and the module.
ENTRY_POINTS = {
    "bin": lambda venv: [venv / "bin" / "cassette"],
    "module": lambda venv: [venv / "bin" / "python", "-m", "cassette_cli"],
}


def test_pip_puts_the_binary_itself_on_the_venv_path(venv):
    cassette = venv / "bin" / "cassette"
    assert cassette.read_bytes()[:4] == b"\x7fELF", "venv/bin/cassette should be the binary, not a wrapper"
    assert os.access(cassette, os.X_OK)
    assert run([cassette, "--version"]).stdout.strip() == f"cassette {VERSION}"
    found = run(
        [
            venv / "bin" / "python",
            "-c",
            "import cassette_cli; print(cassette_cli.find_cassette_bin()); print(cassette_cli.__version__)",
        ]
    )
    assert found.stdout.splitlines() == [str(cassette), VERSION]


@pytest.mark.parametrize("entry", ENTRY_POINTS)
def test_the_installed_copy_replays_the_example_suite(venv, entry):
    result = run([*ENTRY_POINTS[entry](venv), *SUITE])
    assert "9 passed" in result.stdout + result.stderr, result.stdout + result.stderr


@pytest.mark.parametrize("entry", ENTRY_POINTS)
def test_a_miss_exits_2_with_its_explanation_from_python(venv, entry):
    result = run([*ENTRY_POINTS[entry](venv), *STALE], expect=2)
    assert 'replay miss in case "capital"' in result.stderr, result.stderr
    assert '- body.model: "gpt-4o-mini" -> "gpt-4o"' in result.stderr, result.stderr
    assert "3 of 5 cases missed: board-summary, capital, greeting" in result.stderr, result.stderr


def test_python_m_passes_arguments_and_status_through(venv, tmp_path):
    probe = tmp_path / "probe"
    probe.write_text('#!/bin/sh\nprintf "%s\\n" "$@"\nexit 7\n')
    probe.chmod(0o755)
    args = ["exec", "--", "two words", "ünïcode", "--flag=x", "", "'quoted'"]
    result = run(
        [venv / "bin" / "python", "-m", "cassette_cli", *args], expect=7, env=clean_env(CASSETTE_BINARY=str(probe))
    )
    assert result.stdout.split("\n")[:-1] == args


def test_a_wrong_override_is_an_error_not_another_binary(venv):
    result = run(
        [venv / "bin" / "python", "-m", "cassette_cli", "--version"],
        expect=2,
        env=clean_env(CASSETTE_BINARY="/nonexistent/cassette"),
    )
    assert "CASSETTE_BINARY is set to '/nonexistent/cassette', which is not a file" in result.stderr


@pytest.mark.parametrize("layout", ["--target", "--prefix"])
def test_the_binary_is_found_in_target_and_prefix_installs(wheel, bare_python, tmp_path, layout):
    place = tmp_path / "place"
    run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            "--no-index",
            layout,
            place,
            wheel,
        ]
    )
    if layout == "--target":
        site, binary = place, place / "bin" / "cassette"
    else:
        (site,) = place.glob("lib/python*/site-packages")
        binary = place / "bin" / "cassette"
    assert binary.is_file()
    env = clean_env(PYTHONPATH=str(site))
    found = run([bare_python, "-c", "import cassette_cli; print(cassette_cli.find_cassette_bin())"], env=env)
    assert found.stdout.strip() == str(binary)
    assert run([bare_python, "-m", "cassette_cli", "--version"], env=env).stdout.strip() == f"cassette {VERSION}"


def test_a_package_without_its_binary_says_so(venv, bare_python, tmp_path):
    # The Python package copied without the binary, as a broken install would leave it.
    (site,) = venv.glob("lib/python*/site-packages")
    shutil.copytree(site / "cassette_cli", tmp_path / "cassette_cli")
    result = run([bare_python, "-m", "cassette_cli", "--version"], expect=2, env=clean_env(PYTHONPATH=str(tmp_path)))
    assert "the cassette binary of cassette-cli is not installed; looked in:" in result.stderr, result.stderr
    assert str(tmp_path / "bin" / "cassette") in result.stderr
    assert "pip install --force-reinstall cassette-cli" in result.stderr


# ---------------------------------------------------------------------------------------------
# Node: a fresh npm project, the tarballs installed with --offline


def npm_install(project: Path, *specs, extra: tuple = ()) -> None:
    project.mkdir()
    run(["npm", "init", "-y"], cwd=project)
    run(
        ["npm", "install", "--offline", "--no-audit", "--no-fund", "--loglevel=error", "--save-dev", *extra, *specs],
        cwd=project,
    )


@pytest.fixture(scope="session")
def project(tmp_path_factory, tarballs) -> Path:
    """The tarballs installed as a user installs them: scripts run, so the postinstall step put
    the binary in place of the shim."""
    path = tmp_path_factory.mktemp("npm") / "project"
    # The pinned openai client, packed from the copy `npm ci --prefix tests/sdk/node` installed
    # (scripts/test.sh), so that this install too reads nothing from the registry.
    installed = ROOT / "tests" / "sdk" / "node" / "node_modules" / "openai"
    if not installed.is_dir():
        pytest.fail("tests/sdk/node/node_modules/openai is needed: run `npm ci --prefix tests/sdk/node`")
    packed = tmp_path_factory.mktemp("openai")
    run(["npm", "pack", "--ignore-scripts", "--silent", "--pack-destination", packed, "."], cwd=installed)
    (openai,) = packed.glob("openai-*.tgz")
    npm_install(path, tarballs["linux-x64"], tarballs["main"], openai)
    shutil.copy(ROOT / "tests" / "sdk" / "node" / "app.mjs", path / "app.mjs")
    return path


@pytest.fixture(scope="session")
def project_without_scripts(tmp_path_factory, tarballs) -> Path:
    """The same packages installed with --ignore-scripts: the JavaScript shim stays."""
    path = tmp_path_factory.mktemp("npm-noscripts") / "project"
    npm_install(path, tarballs["linux-x64"], tarballs["main"], extra=("--ignore-scripts",))
    return path


# The two ways npm leaves the command: the binary itself (scripts ran), the shim (they did not).
INSTALLS = {"scripts": "project", "ignore-scripts": "project_without_scripts"}


@pytest.fixture(params=INSTALLS)
def installed(request) -> Path:
    return request.getfixturevalue(INSTALLS[request.param])


def shim(project: Path) -> list:
    """The command as npm linked it (node_modules/.bin/cassette -> cassette-cli/bin/cassette.js)."""
    return [project / "node_modules" / ".bin" / "cassette"]


def command_file(project: Path) -> Path:
    return project / "node_modules" / "cassette-cli" / "bin" / "cassette.js"


def platform_binary(project: Path) -> Path:
    return project / "node_modules" / "cassette-cli-linux-x64" / "bin" / "cassette"


def is_shim(path: Path) -> bool:
    return path.read_bytes().startswith(b"#!/usr/bin/env node\n")


NPM_ENTRY_POINTS = {
    ".bin": lambda project: shim(project),
    "npx cassette-cli": lambda project: ["npx", "--offline", "cassette-cli"],
    "npx cassette": lambda project: ["npx", "--offline", "cassette"],
}


@pytest.mark.parametrize("entry", NPM_ENTRY_POINTS)
def test_npm_puts_the_command_on_the_project_path(installed, entry):
    result = run([*NPM_ENTRY_POINTS[entry](installed), "--version"], cwd=installed)
    assert result.stdout.strip() == f"cassette {VERSION}"


def test_the_postinstall_step_puts_the_binary_itself_in_place_of_the_shim(project):
    link = project / "node_modules" / ".bin" / "cassette"
    assert link.resolve() == command_file(project)
    assert command_file(project).read_bytes()[:4] == b"\x7fELF", "the postinstall step left the shim"
    # A hard link to the platform package's binary: no second copy on disk.
    assert command_file(project).stat().st_ino == platform_binary(project).stat().st_ino
    assert os.access(command_file(project), os.X_OK)
    assert not list(command_file(project).parent.glob(".cassette.js.*")), "a temporary file was left"


def test_with_ignore_scripts_the_shim_stays_and_runs_the_binary(project_without_scripts):
    assert is_shim(command_file(project_without_scripts))
    assert run([*shim(project_without_scripts), "--version"]).stdout.strip() == f"cassette {VERSION}"


def test_the_shim_runs_the_platform_package_binary(project):
    found = run(
        ["node", "--input-type=module", "-e", "import { binaryPath } from 'cassette-cli'; console.log(binaryPath())"],
        cwd=project,
    )
    binary = project / "node_modules" / "cassette-cli-linux-x64" / "bin" / "cassette"
    assert found.stdout.strip() == str(binary)
    assert json.loads((project / "node_modules" / "cassette-cli" / "package.json").read_text())["version"] == VERSION


@pytest.mark.parametrize("present", [["glibc", "musl"], ["musl"], ["glibc"]])
def test_the_lookup_picks_the_libc_of_the_running_node(project, tmp_path, present):
    # npm before 10 installs the glibc and the musl package both; the running Node's libc then
    # decides (this machine is glibc). Where only one is installed, that one is used.
    modules = tmp_path / "node_modules"
    shutil.copytree(project / "node_modules" / "cassette-cli", modules / "cassette-cli")
    for libc in present:
        name = "cassette-cli-linux-x64" + ("-musl" if libc == "musl" else "")
        (modules / name / "bin").mkdir(parents=True)
        (modules / name / "package.json").write_text(json.dumps({"name": name, "version": VERSION}))
        (modules / name / "bin" / "cassette").write_text("#!/bin/sh\n")
    found = run(
        ["node", "--input-type=module", "-e", "import { binaryPath } from 'cassette-cli'; console.log(binaryPath())"],
        cwd=tmp_path,
    )
    expected = "cassette-cli-linux-x64" if "glibc" in present else "cassette-cli-linux-x64-musl"
    assert found.stdout.strip() == str(modules / expected / "bin" / "cassette")


def test_the_npm_copy_replays_the_example_suite(installed):
    result = run([*shim(installed), *SUITE])
    assert "9 passed" in result.stdout + result.stderr, result.stdout + result.stderr


@pytest.mark.parametrize("entry", NPM_ENTRY_POINTS)
def test_a_miss_exits_2_with_its_explanation_through_the_npm_command(installed, entry):
    # npx finds the local install from the project's folder, so the suite is named absolutely.
    stale = [STALE[0], ROOT / STALE[1], "--store", f"file://{ROOT / 'examples/triage/cassettes'}"]
    result = run([*NPM_ENTRY_POINTS[entry](installed), *stale], expect=2, cwd=installed)
    assert 'replay miss in case "capital"' in result.stderr, result.stderr
    assert '- body.model: "gpt-4o-mini" -> "gpt-4o"' in result.stderr, result.stderr
    assert "3 of 5 cases missed: board-summary, capital, greeting" in result.stderr, result.stderr


def test_the_override_gets_the_arguments_and_gives_its_status(installed, tmp_path):
    # CASSETTE_BINARY at run time: the shim spawns it; the binary in the shim's place execs it.
    probe = tmp_path / "probe"
    probe.write_text('#!/bin/sh\nprintf "%s\\n" "$@"\nexit 7\n')
    probe.chmod(0o755)
    args = ["exec", "--", "two words", "ünïcode", "--flag=x", "", "'quoted'", "$HOME"]
    result = run([*shim(installed), *args], expect=7, env=clean_env(CASSETTE_BINARY=str(probe)))
    assert result.stdout.split("\n")[:-1] == args


def test_the_command_dies_of_the_signal_its_binary_died_of(installed, tmp_path):
    probe = tmp_path / "probe"
    probe.write_text("#!/bin/sh\nkill -TERM $$\n")
    probe.chmod(0o755)
    result = run([*shim(installed), "--version"], expect=None, env=clean_env(CASSETTE_BINARY=str(probe)))
    assert result.returncode == -signal.SIGTERM, (result.returncode, result.stderr)


def test_an_override_of_the_binary_in_the_shims_place_is_checked_as_the_shim_checks_it(project, tmp_path):
    env = clean_env(CASSETTE_BINARY=str(tmp_path / "nope"))
    result = run([*shim(project), "--version"], expect=2, env=env)
    assert f'CASSETTE_BINARY is set to "{tmp_path / "nope"}", which does not exist' in result.stderr
    # Empty is unset, as in the shim.
    assert run([*shim(project), "--version"], env=clean_env(CASSETTE_BINARY="")).stdout.strip() == f"cassette {VERSION}"
    # Pointing at the npm command itself runs it, instead of execing itself forever.
    for itself in (project / "node_modules" / ".bin" / "cassette", platform_binary(project)):
        result = run([*shim(project), "--version"], env=clean_env(CASSETTE_BINARY=str(itself)), timeout=20)
        assert result.stdout.strip() == f"cassette {VERSION}"
    # A file that is not a program: an error naming it, not a run of the installed binary.
    text = tmp_path / "not-a-program"
    text.write_text("hello\n")
    text.chmod(0o644)
    result = run([*shim(project), "--version"], expect=2, env=clean_env(CASSETTE_BINARY=str(text)))
    assert f"cassette: cannot run {text}: " in result.stderr, result.stderr
    assert "cassette 0" not in result.stdout
    # Other copies of the binary (pip's, cargo's, the platform package's) ignore the variable.
    with_probe = clean_env(CASSETTE_BINARY=str(tmp_path / "nope"))
    assert run([platform_binary(project), "--version"], env=with_probe).stdout.strip() == f"cassette {VERSION}"


def _children(pid: int) -> list[int]:
    children = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        children += [int(c) for c in (task / "children").read_text().split()]
    return children


def _program(pid: int) -> Path | str:
    """The file a process runs, or, for a `cassette proxy` of the same user run without root
    (it makes itself undumpable, which hides its `exe` link), its kernel name."""
    try:
        return Path(f"/proc/{pid}/exe").resolve(strict=True)
    except PermissionError:
        return Path(f"/proc/{pid}/comm").read_text().strip()


def _alive(pid: int) -> bool:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return False
    return "State:\tZ" not in status


def _wait_healthy(url: str) -> None:
    deadline = time.monotonic() + 10
    while True:
        try:
            with urllib.request.urlopen(f"{url}/healthz", timeout=5) as response:
                if response.status == 200:
                    return
        except OSError:
            if time.monotonic() > deadline:
                raise
        time.sleep(0.05)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_to_the_npm_command_reaches_the_binary(installed, tmp_path, sig):
    # `cassette proxy` shuts down cleanly on SIGINT and SIGTERM and exits 0. The signal goes to
    # the command alone (not its process group): through the shim, without forwarding, the
    # proxy would be orphaned; in the shim's place, the binary is the process signalled.
    process = subprocess.Popen(
        [*shim(installed), "proxy", "--listen", "127.0.0.1:0", "--store", f"file://{tmp_path}"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=clean_env(),
        start_new_session=True,
    )
    try:
        assert process.stderr is not None
        for line in process.stderr:
            if "listening on " in line:
                url = line.split("listening on ", 1)[1].split()[0]
                break
        else:
            pytest.fail("the proxy did not start through the npm command")
        _wait_healthy(url)
        if is_shim(command_file(installed)):
            (binary,) = _children(process.pid)
        else:
            assert _program(process.pid) in (command_file(installed), "cassette"), "Node is in between"
            assert _children(process.pid) == []
            binary = process.pid
        process.send_signal(sig)
        status = process.wait(timeout=30)
        deadline = time.monotonic() + 10
        while _alive(binary) and time.monotonic() < deadline:
            time.sleep(0.05)
        orphaned = _alive(binary)
    finally:
        # The command's session: whatever is left of it (an orphaned binary) goes too.
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        process.wait()
    assert not orphaned, "the binary outlived the shim: the signal was not passed on"
    assert status == 0, f"the command exited {status}, the proxy's clean shutdown is 0"


def _pack_platform_package(folder: Path, binary: bytes, out: Path) -> Path:
    """A linux-x64 platform package of this version holding `binary` (a broken build)."""
    shutil.copytree(ROOT / "npm" / "platforms" / "linux-x64", folder)
    (folder / "bin").mkdir()
    (folder / "bin" / "cassette").write_bytes(binary)
    (folder / "bin" / "cassette").chmod(0o755)
    out.mkdir(exist_ok=True)
    run(["npm", "pack", "--silent", "--pack-destination", out], cwd=folder)
    (tarball,) = out.glob("cassette-cli-linux-x64-*.tgz")
    return tarball


@pytest.mark.parametrize("broken", ["another version", "not a program here"])
def test_a_binary_that_does_not_pass_its_check_leaves_the_shim(tmp_path, tarballs, broken):
    # The postinstall step runs `--version` before it replaces anything: a binary of another
    # version or one that cannot run here is left to the shim (and to its error messages).
    binary = (
        b'#!/bin/sh\necho "cassette 0.0.0-other"\n'
        if broken == "another version"
        else b"\x7fELF\x02\x01\x01 not really an ELF file\n"
    )
    fake = _pack_platform_package(tmp_path / "fake", binary, tmp_path / "packed")
    project = tmp_path / "project"
    npm_install(project, fake, tarballs["main"])
    assert is_shim(command_file(project)), "a binary that failed its check replaced the shim"
    assert not list(command_file(project).parent.glob(".cassette.js.*")), "a temporary file was left"
    result = run([*shim(project), "--version"], expect=None)
    if broken == "another version":
        assert result.stdout.strip() == "cassette 0.0.0-other"
    else:
        # Node's spawn goes through execvp, which hands a file the kernel refuses (ENOEXEC) to
        # /bin/sh: either the shim says it cannot run the binary (2) or sh does (127); both
        # fail and name the file.
        assert result.returncode in (2, 127), result.stderr
        assert "cassette-cli-linux-x64/bin/cassette" in result.stderr, result.stderr


def test_the_postinstall_step_can_run_again_and_only_under_npm(tmp_path, tarballs):
    # esbuild's installer once broke `npm rebuild` (it ran its replaced shim as JavaScript).
    project = tmp_path / "project"
    npm_install(project, tarballs["linux-x64"], tarballs["main"], extra=("--ignore-scripts",))
    install = project / "node_modules" / "cassette-cli" / "install.js"
    # Other installers keep the shim: pnpm's .bin scripts may say `node bin/cassette.js`, Yarn
    # may run the step from another platform over the same tree; unknown ones likewise.
    for agent in (
        "yarn/1.22.22 npm/? node/v20.20.2 linux x64",
        "pnpm/9.15.0 npm/? node/v20.20.2 linux x64",
        "bun/1.2.0 npm/? node/v20.20.2 linux x64",
        None,
    ):
        env = clean_env() if agent is None else clean_env(npm_config_user_agent=agent)
        result = run(["node", install], env=env)
        assert "keeping the JavaScript shim" in result.stderr, (agent, result.stderr)
        assert is_shim(command_file(project)), agent
    # `npm rebuild` runs the step as npm: the binary moves in; again: nothing changes.
    for _ in range(2):
        run(["npm", "rebuild", "--offline", "--loglevel=error", "--foreground-scripts"], cwd=project)
        assert command_file(project).stat().st_ino == platform_binary(project).stat().st_ino
        assert run([*shim(project), "--version"]).stdout.strip() == f"cassette {VERSION}"
    stale = [STALE[0], ROOT / STALE[1], "--store", f"file://{ROOT / 'examples/triage/cassettes'}"]
    result = run([*shim(project), *stale], expect=2)
    assert 'replay miss in case "capital"' in result.stderr, result.stderr
    assert not list(command_file(project).parent.glob(".cassette.js.*")), "a temporary file was left"


def test_a_checkout_of_the_package_keeps_its_shim(tmp_path, tarballs):
    # `npm install` inside a clone of npm/cassette-cli runs the package's own postinstall: it
    # must never turn the committed shim into a binary.
    checkout = tmp_path / "cassette-cli"
    shutil.copytree(ROOT / "npm" / "cassette-cli", checkout)
    result = run(["node", checkout / "install.js"], env=clean_env(npm_config_user_agent="npm/11.0.0 node/v20"))
    assert "not installed as a dependency" in result.stderr
    assert is_shim(checkout / "bin" / "cassette.js")


def test_a_project_without_the_platform_package_is_told_what_to_do(tmp_path, tarballs):
    project = tmp_path / "project"
    npm_install(project, tarballs["main"], extra=("--omit=optional",))
    assert is_shim(command_file(project)), "no platform package, yet the shim was replaced"
    result = run([*shim(project), "--version"], expect=2)
    assert (
        "the platform package of cassette-cli for linux-x64 (cassette-cli-linux-x64 or "
        "cassette-cli-linux-x64-musl) is not installed" in result.stderr
    ), result.stderr
    assert "--omit=optional" in result.stderr
    # The override still works there.
    binary = tmp_path / "cassette"
    with tarfile.open(tarballs["linux-x64"]) as archive:
        binary.write_bytes(archive.extractfile("package/bin/cassette").read())
    binary.chmod(0o755)
    result = run([*shim(project), "--version"], env=clean_env(CASSETTE_BINARY=str(binary)))
    assert result.stdout.strip() == f"cassette {VERSION}"
    result = run([*shim(project), "--version"], expect=2, env=clean_env(CASSETTE_BINARY=str(tmp_path / "nope")))
    assert f'CASSETTE_BINARY is set to "{tmp_path / "nope"}", which does not exist' in result.stderr


# ---------------------------------------------------------------------------------------------
# One SDK call of each language through `cassette exec`, from the installed copies


PY_APP = textwrap.dedent(
    """
    import json, sys
    import openai

    client = openai.OpenAI()  # the base URL and key come from what cassette exec sets
    try:
        r = client.chat.completions.create(
            model="gpt-4o-mini", messages=[{"role": "user", "content": sys.argv[1]}]
        )
        print(json.dumps({"content": r.choices[0].message.content}))
    except openai.ConflictError as e:
        print(json.dumps({"miss": e.body["key"]}))
    """
)


def test_the_openai_python_sdk_through_the_installed_cassette_exec(venv, tmp_path):
    app = tmp_path / "app.py"
    app.write_text(PY_APP)
    store = f"file://{tmp_path / 'cassettes'}"
    # The app runs on this interpreter, which has the pinned openai SDK (tests/sdk/requirements.txt).
    command = ["--", sys.executable, app]
    upstream = FakeUpstream()
    try:
        recorded = run(
            [venv / "bin" / "cassette", "exec", "--store", store, *command, "Where is my refund?"],
            env=clean_env(CASSETTE_MODE="record", UPSTREAM_BASE=upstream.url, OPENAI_API_KEY="sk-test-package"),
        )
        assert json.loads(recorded.stdout)["content"].startswith("I'll look that up")
        assert len(upstream.requests) == 1
        upstream.stop()
        before = upstream.connections

        replayed = run([venv / "bin" / "cassette", "exec", "--store", store, *command, "Where is my refund?"])
        assert replayed.stdout == recorded.stdout
        assert "1 hits, 0 misses" in replayed.stderr, replayed.stderr

        missed = run(
            [
                venv / "bin" / "python",
                "-m",
                "cassette_cli",
                "exec",
                "--store",
                store,
                *command,
                "Where is my refund now?",
            ],
            expect=2,
        )
        key = json.loads(missed.stdout)["miss"]
        assert f"  {key} POST /v1/chat/completions" in missed.stderr, missed.stderr
        assert '"Where is my refund?" -> "Where is my refund now?"' in missed.stderr, missed.stderr
        assert upstream.connections == before, "a replay reached the vendor"
    finally:
        upstream.close()


def test_the_openai_node_sdk_through_npx_cassette_exec(project, tmp_path):
    store = f"file://{tmp_path / 'cassettes'}"
    npx = ["npx", "--offline", "cassette-cli", "exec", "--store", store, "--", "node", "app.mjs"]
    upstream = FakeUpstream()
    try:
        recorded = run(
            [*npx, "Where is my refund?", "plain"],
            cwd=project,
            env=clean_env(CASSETTE_MODE="record", UPSTREAM_BASE=upstream.url, OPENAI_API_KEY="sk-test-package-node"),
        )
        assert json.loads(recorded.stdout)["content"].startswith("I'll look that up")
        assert len(upstream.requests) == 1
        upstream.stop()
        before = upstream.connections

        replayed = run([*npx, "Where is my refund?", "plain"], cwd=project)
        assert replayed.stdout == recorded.stdout
        assert "1 hits, 0 misses" in replayed.stderr, replayed.stderr

        missed = run([*npx, "Where is my refund now?", "plain"], cwd=project, expect=2)
        key = json.loads(missed.stdout)["miss"]
        assert f"  {key} POST /v1/chat/completions" in missed.stderr, missed.stderr
        assert '"Where is my refund?" -> "Where is my refund now?"' in missed.stderr, missed.stderr
        assert upstream.connections == before, "a replay reached the vendor"
    finally:
        upstream.close()


def test_the_versions_agree():
    result = run([sys.executable, ROOT / "scripts" / "check-versions.py"])
    assert f"cassette {VERSION} everywhere" in result.stdout

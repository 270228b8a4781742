"""Finds the peers' toolchains and builds the peers' programs (python3 standard library only).

Each peer is one program per runtime (bench/peers/<lang>/) speaking the protocol of
bench/peers/README.md.  build_all() returns one Program per runtime, either ready (argv prefix,
runtime version) or skipped with the reason.  Builds are cached under build/peers/<name>/<key>/
where <key> hashes the sources and the toolchain version: a second `make bench` reuses them.
Nothing here raises for a missing toolchain, a failed build or an unreachable registry: the peer
is skipped and says why.
"""

from __future__ import annotations

import concurrent.futures
import glob
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

PEERS_DIR = Path(__file__).resolve().parent
FAILED_BUILD_RETRY_AFTER_S = 3600
REPO_ROOT = PEERS_DIR.parent.parent


@dataclass
class Program:
    key: str                      # "go", "tokio", ...
    runtime: str                  # the Runtime column: "Go 1.26.8"
    argv: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    skipped: str | None = None    # reason, when not runnable
    details: dict = field(default_factory=dict)  # versions etc. for the JSON


def _run(cmd: list[str], timeout: float = 600, env: dict | None = None,
         cwd: Path | None = None) -> tuple[int, str]:
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           errors="replace", timeout=timeout, cwd=cwd,
                           env={**os.environ, **(env or {})})
        return p.returncode, p.stdout
    except subprocess.TimeoutExpired:
        return -1, f"timed out after {timeout:.0f} s: {' '.join(cmd)}"
    except OSError as exc:
        return -2, str(exc)


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0].strip() if text.strip() else ""


def _hash(paths: list[Path], extra: str) -> str:
    h = hashlib.sha256(extra.encode())
    for p in sorted(paths):
        h.update(str(p.relative_to(PEERS_DIR if p.is_relative_to(PEERS_DIR) else REPO_ROOT)).encode())
        h.update(p.read_bytes())
    return h.hexdigest()[:16]


def _tail(text: str, n: int = 6) -> str:
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    return " | ".join(lines[-n:])[-400:]


class _Cache:
    """build/peers/<name>/<key>/: 'ok' marks a finished build, 'failed' holds the reason."""

    def __init__(self, root: Path, name: str, key: str):
        self.dir = root / name / key
        self.ok = self.dir / "ok"
        self.failed = self.dir / "failed"

    def state(self, rebuild: bool) -> str | None:
        if rebuild:
            shutil.rmtree(self.dir, ignore_errors=True)
            return None
        if self.ok.exists():
            return "ok"
        if self.failed.exists():
            # A failure may be a registry that was unreachable for a while: retry after an hour.
            if time.time() - self.failed.stat().st_mtime > FAILED_BUILD_RETRY_AFTER_S:
                return None
            return "failed"
        return None

    def start(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)
        self.dir.mkdir(parents=True, exist_ok=True)

    def done(self, meta: dict) -> None:
        self.ok.write_text(json.dumps(meta))

    def fail(self, why: str) -> str:
        self.failed.write_text(why)
        return why

    def meta(self) -> dict:
        try:
            return json.loads(self.ok.read_text())
        except (OSError, json.JSONDecodeError):
            return {}


def _log(msg: str) -> None:
    print(f"peers: {msg}", flush=True)


# --------------------------------------------------------------------------- #
# Go
# --------------------------------------------------------------------------- #
def build_go(root: Path, rebuild: bool) -> Program:
    go = shutil.which("go")
    if not go:
        return Program("go", "Go", skipped="go not found")
    rc, out = _run([go, "version"], 60)
    version = re.sub(r"^go version go", "", _first_line(out)).split(" ")[0] or "?"
    src = PEERS_DIR / "go"
    cache = _Cache(root, "go", _hash(list(src.glob("*.go")) + [src / "go.mod"], out))
    exe = cache.dir / "peer"
    state = cache.state(rebuild)
    if state is None:
        _log(f"building the Go peer (go {version})")
        cache.start()
        rc, out = _run([go, "build", "-o", str(exe), "."], 600, cwd=src,
                       env={"GOTOOLCHAIN": "local", "GOFLAGS": "-mod=mod"})
        state = "ok" if rc == 0 else "failed"
        if rc == 0:
            cache.done({})
        else:
            cache.fail(f"go build failed: {_tail(out)}")
    if state == "failed":
        return Program("go", f"Go {version}", skipped=cache.failed.read_text())
    return Program("go", f"Go {version}", [str(exe)], details={"go": version})


# --------------------------------------------------------------------------- #
# bench/loadgen: the load client of the echo and sync_over_async_server groups (Go)
# --------------------------------------------------------------------------- #
LOADGEN_DIR = PEERS_DIR.parent / "loadgen"


def build_loadgen(root: Path, rebuild: bool) -> tuple[Path | None, str]:
    """(the loadgen executable, "") or (None, why not). Built like the Go peer, cached alike."""
    go = shutil.which("go")
    if not go:
        return None, "go not found (bench/loadgen is written in Go)"
    rc, out = _run([go, "version"], 60)
    cache = _Cache(root, "loadgen",
                   _hash(list(LOADGEN_DIR.glob("*.go")) + [LOADGEN_DIR / "go.mod"], out))
    exe = cache.dir / "loadgen"
    state = cache.state(rebuild)
    if state is None:
        _log("building bench/loadgen")
        cache.start()
        rc, out = _run([go, "build", "-o", str(exe), "."], 600, cwd=LOADGEN_DIR,
                       env={"GOTOOLCHAIN": "local", "GOFLAGS": "-mod=mod"})
        if rc == 0:
            cache.done({})
            state = "ok"
        else:
            cache.fail(f"go build of bench/loadgen failed: {_tail(out)}")
            state = "failed"
    if state == "failed":
        return None, cache.failed.read_text()
    return exe, ""


# --------------------------------------------------------------------------- #
# Rust: tokio and rayon (cargo, crates.io). One crate, one binary: `peer --list` is tokio's
# methods, `peer --rayon --list` rayon's, two runtimes in the tables.
# --------------------------------------------------------------------------- #
def _crate_version(lock: Path, crate: str) -> str:
    try:
        m = re.search(rf'name = "{re.escape(crate)}"\nversion = "([^"]+)"', lock.read_text())
        return m.group(1) if m else "?"
    except OSError:
        return "?"


_RUST_LOCK = threading.Lock()
_RUST_BUILDS: dict[tuple[Path, bool], tuple] = {}


def _build_rust(root: Path, rebuild: bool) -> tuple[str, Path | None, dict, str | None]:
    """The one cargo build behind build_tokio and build_rayon (build_all may run them at once):
    (rustc version, the binary or None, the crates' versions, why there is no binary)."""
    with _RUST_LOCK:
        if (root, rebuild) not in _RUST_BUILDS:
            _RUST_BUILDS[(root, rebuild)] = _build_rust_once(root, rebuild)
        return _RUST_BUILDS[(root, rebuild)]


def _build_rust_once(root: Path, rebuild: bool) -> tuple[str, Path | None, dict, str | None]:
    cargo = shutil.which("cargo") or str(Path.home() / ".cargo/bin/cargo")
    if not Path(cargo).exists():
        return "", None, {}, "cargo not found"
    rc, rustc = _run([str(Path(cargo).parent / "rustc") if (Path(cargo).parent / "rustc").exists()
                      else "rustc", "--version"], 60)
    rust_version = _first_line(rustc).replace("rustc ", "").split(" ")[0] or "?"
    src = PEERS_DIR / "rust"
    lock = src / "Cargo.lock"
    files = [src / "Cargo.toml", *src.glob("src/*.rs")]
    if lock.exists():
        files.append(lock)
    cache = _Cache(root, "rust", _hash(files, rustc))
    state = cache.state(rebuild)
    target = root / "rust-target"  # shared across keys: incremental rebuilds stay cheap
    if state is None:
        _log(f"building the tokio and rayon peer (rustc {rust_version}; cargo fetches from "
             "crates.io)")
        cache.start()
        # Short network timeouts: an unreachable crates.io must skip the peer, not stall a test.
        rc, out = _run([cargo, "build", "--release", "--quiet", "--target-dir", str(target)],
                       600, cwd=src, env={"CARGO_NET_RETRY": "1", "CARGO_HTTP_TIMEOUT": "30",
                                          "CARGO_HTTP_CONNECT_TIMEOUT": "15"})
        if rc == 0:
            shutil.copy2(target / "release" / "tpl-bench-peer", cache.dir / "peer")
            cache.done({c: _crate_version(lock, c) for c in ("tokio", "rayon")})
            state = "ok"
        else:
            cache.fail(f"cargo build failed (crates.io unreachable?): {_tail(out)}")
            state = "failed"
    versions = {c: cache.meta().get(c) or _crate_version(lock, c) for c in ("tokio", "rayon")}
    if state == "failed":
        return rust_version, None, versions, cache.failed.read_text()
    return rust_version, cache.dir / "peer", versions, None


def build_tokio(root: Path, rebuild: bool) -> Program:
    rust_version, exe, versions, skipped = _build_rust(root, rebuild)
    if not rust_version:
        return Program("tokio", "Rust tokio", skipped=skipped)
    runtime = f"Rust {rust_version}, tokio {versions['tokio']}"
    if exe is None:
        return Program("tokio", runtime, skipped=skipped)
    return Program("tokio", runtime, [str(exe)],
                   details={"rustc": rust_version, "tokio": versions["tokio"]})


def build_rayon(root: Path, rebuild: bool) -> Program:
    rust_version, exe, versions, skipped = _build_rust(root, rebuild)
    if not rust_version:
        return Program("rayon", "Rust rayon", skipped=skipped)
    runtime = f"Rust {rust_version}, rayon {versions['rayon']}"
    if exe is None:
        return Program("rayon", runtime, skipped=skipped)
    return Program("rayon", runtime, [str(exe), "--rayon"],
                   details={"rustc": rust_version, "rayon": versions["rayon"]})


# --------------------------------------------------------------------------- #
# C++: Asio and oneTBB (Debian's libasio-dev, libtbb-dev)
# --------------------------------------------------------------------------- #
def _dpkg_version(pkg: str) -> str | None:
    rc, out = _run(["dpkg-query", "-W", "-f=${Version}", pkg], 30)
    return out.strip() if rc == 0 and out.strip() else None


def _build_cxx(root: Path, rebuild: bool, key: str, label: str, source: str, header: str,
               pkg: str, libs: list[str]) -> Program:
    cxx = shutil.which("g++")
    if not cxx:
        return Program(key, label, skipped="g++ not found")
    if not Path(header).exists():
        return Program(key, label, skipped=f"{header} not found (apt-get install {pkg})")
    pkg_version = _dpkg_version(pkg) or "?"
    rc, gxx = _run([cxx, "--version"], 30)
    gxx_version = _first_line(gxx).split(" ")[-1]
    runtime = f"{label} {pkg_version.split(':')[-1].split('-')[0]} (g++ {gxx_version})"
    src = PEERS_DIR / "cpp" / source
    cache = _Cache(root, key, _hash([src, PEERS_DIR / "cpp" / "peer_main.hpp"], gxx + pkg_version))
    state = cache.state(rebuild)
    exe = cache.dir / "peer"
    if state is None:
        _log(f"building the {label} peer")
        cache.start()
        rc, out = _run([cxx, "-std=c++20", "-O2", "-DNDEBUG", "-Wall", "-Wextra", "-pthread",
                        str(src), "-o", str(exe), *libs], 600)
        if rc == 0:
            cache.done({})
            state = "ok"
        else:
            cache.fail(f"g++ failed: {_tail(out)}")
            state = "failed"
    if state == "failed":
        return Program(key, runtime, skipped=cache.failed.read_text())
    return Program(key, runtime, [str(exe)], details={pkg: pkg_version, "g++": gxx_version})


def build_asio(root: Path, rebuild: bool) -> Program:
    return _build_cxx(root, rebuild, "asio", "Asio", "asio_peer.cpp", "/usr/include/asio.hpp",
                      "libasio-dev", [])


def build_tbb(root: Path, rebuild: bool) -> Program:
    return _build_cxx(root, rebuild, "tbb", "oneTBB", "tbb_peer.cpp",
                      "/usr/include/oneapi/tbb.h", "libtbb-dev", ["-ltbb"])


# --------------------------------------------------------------------------- #
# Java 21+ (virtual threads)
# --------------------------------------------------------------------------- #
def _java_major(java: str) -> tuple[int, str]:
    rc, out = _run([java, "-version"], 60)
    m = re.search(r'version "(\d+)(?:\.(\d+))?[^"]*"', out)
    if rc != 0 or not m:
        return 0, ""
    major = int(m.group(1))
    if major == 1 and m.group(2):
        major = int(m.group(2))
    return major, _first_line(out)


def find_jdk21() -> tuple[Path | None, str, list[str]]:
    """(JAVA_HOME of a JDK 21+, its version line, the versions seen)."""
    candidates: list[Path] = []
    if os.environ.get("JAVA_HOME"):
        candidates.append(Path(os.environ["JAVA_HOME"]))
    candidates += [Path(p) for p in sorted(glob.glob("/usr/lib/jvm/*"), reverse=True)]
    candidates += [Path(p) for p in sorted(glob.glob("/opt/*jdk*"), reverse=True)]
    java = shutil.which("java")
    if java:
        candidates.append(Path(os.path.realpath(java)).parent.parent)
    seen: list[str] = []
    best: tuple[int, Path, str] | None = None
    for home in candidates:
        if not (home / "bin" / "java").exists() or not (home / "bin" / "javac").exists():
            continue
        major, line = _java_major(str(home / "bin" / "java"))
        seen.append(f"{home}: {major}")
        if major >= 21 and (best is None or major > best[0]):
            best = (major, home, line)
    if best:
        return best[1], best[2], seen
    return None, "", seen


def build_java(root: Path, rebuild: bool) -> Program:
    home, line, seen = find_jdk21()
    if home is None:
        return Program("java", "Java", skipped="no JDK 21+ found (virtual threads need 21); saw: "
                       + (", ".join(seen) or "no JDK"))
    rc, vout = _run([str(home / "bin" / "java"), "-version"], 60)
    m = re.search(r'version "([^"]+)"', vout)
    version = m.group(1) if m else "?"
    vendor = "Temurin " if "Temurin" in vout else ""
    runtime = f"Java {vendor}{version}"
    src = PEERS_DIR / "java" / "Peer.java"
    cache = _Cache(root, "java", _hash([src], vout))
    state = cache.state(rebuild)
    if state is None:
        _log(f"building the Java peer ({runtime})")
        cache.start()
        rc, out = _run([str(home / "bin" / "javac"), "-d", str(cache.dir), str(src)], 600)
        if rc == 0:
            cache.done({})
            state = "ok"
        else:
            cache.fail(f"javac failed: {_tail(out)}")
            state = "failed"
    if state == "failed":
        return Program("java", runtime, skipped=cache.failed.read_text())
    # A 1M-virtual-thread chain needs more than the default 1/4 of RAM on small machines: give
    # the heap room, as one would in production; -Xss is for the platform threads.
    return Program("java", runtime,
                   [str(home / "bin" / "java"), "-Xmx8g", "-XX:+UseParallelGC", "-cp",
                    str(cache.dir), "Peer"],
                   details={"java": line, "java_home": str(home)})


# --------------------------------------------------------------------------- #
# C#: Mono (mcs) and .NET Core 3.1 CoreCLR (PyPI's dotnetcore2)
# --------------------------------------------------------------------------- #
def build_mono(root: Path, rebuild: bool) -> Program:
    mcs, mono = shutil.which("mcs"), shutil.which("mono")
    if not mcs or not mono:
        return Program("mono", "Mono", skipped="mcs/mono not found (apt-get install mono-mcs)")
    rc, vout = _run([mono, "--version"], 60)
    m = re.search(r"version (\S+)", vout)
    version = m.group(1) if m else "?"
    runtime = f"Mono {version}"
    src = PEERS_DIR / "csharp" / "Peer.cs"
    cache = _Cache(root, "mono", _hash([src], vout))
    state = cache.state(rebuild)
    exe = cache.dir / "peer.exe"
    if state is None:
        _log(f"building the C# peer for {runtime}")
        cache.start()
        rc, out = _run([mcs, "-optimize+", "-nowarn:1998,4014", "-r:System.dll",
                        "-r:System.Core.dll", f"-out:{exe}", str(src)], 300)
        if rc == 0:
            cache.done({})
            state = "ok"
        else:
            cache.fail(f"mcs failed: {_tail(out)}")
            state = "failed"
    if state == "failed":
        return Program("mono", runtime, skipped=cache.failed.read_text())
    return Program("mono", runtime, [mono, "--server", str(exe)], details={"mono": version})


def find_dotnetcore2(venv: Path) -> Path | None:
    hits = sorted(glob.glob(str(venv / "lib" / "python*" / "site-packages" / "dotnetcore2" / "bin")))
    return Path(hits[-1]) if hits else None


def build_coreclr(root: Path, rebuild: bool, venv: Path | None) -> Program:
    label = ".NET Core"
    mcs = shutil.which("mcs")
    if not mcs:
        return Program("coreclr", label, skipped="mcs not found (apt-get install mono-mcs)")
    dotnet_dir = find_dotnetcore2(venv) if venv else None
    if dotnet_dir is None:
        return Program("coreclr", label,
                       skipped="no .NET runtime (pip package dotnetcore2 not installed: PyPI unreachable?)")
    fws = sorted((dotnet_dir / "shared" / "Microsoft.NETCore.App").glob("*"))
    if not fws:
        return Program("coreclr", label, skipped=f"no framework under {dotnet_dir}/shared")
    fw = fws[-1]
    version = fw.name
    runtime = f".NET Core {version} (CoreCLR)"
    src = PEERS_DIR / "csharp" / "Peer.cs"
    cache = _Cache(root, "coreclr", _hash([src], str(fw) + mcs))
    state = cache.state(rebuild)
    dll = cache.dir / "peer.dll"
    if state is None:
        _log(f"building the C# peer for {runtime} (mcs against its framework assemblies)")
        cache.start()
        refs = ["System.Private.CoreLib", "System.Runtime", "System.Threading.Channels",
                "System.Console", "System.Collections.Concurrent", "System.Threading",
                "System.Threading.Tasks.Parallel", "System.Threading.Thread",
                "System.Threading.ThreadPool", "System.Collections", "System.Linq",
                "System.Diagnostics.Process", "System.ComponentModel.Primitives",
                "System.Runtime.Extensions", "System.Net.Sockets", "System.Net.Primitives",
                "netstandard"]
        cmd = [mcs, "-nostdlib", "-noconfig", "-optimize+", "-nowarn:1998,4014,1702", "-define:CORECLR",
               "-target:exe", f"-out:{dll}", str(src)]
        cmd += [f"-r:{fw / (r + '.dll')}" for r in refs if (fw / (r + ".dll")).exists()]
        rc, out = _run(cmd, 300)
        if rc == 0:
            (cache.dir / "peer.runtimeconfig.json").write_text(json.dumps({"runtimeOptions": {
                "tfm": "netcoreapp3.1",
                "framework": {"name": "Microsoft.NETCore.App", "version": version},
                "configProperties": {"System.GC.Server": False,
                                     "System.GC.Concurrent": True}}}))
            cache.done({})
            state = "ok"
        else:
            cache.fail(f"mcs (CoreCLR references) failed: {_tail(out)}")
            state = "failed"
    if state == "failed":
        return Program("coreclr", runtime, skipped=cache.failed.read_text())
    return Program("coreclr", runtime, [str(dotnet_dir / "dotnet"), str(dll)],
                   env={"DOTNET_SYSTEM_GLOBALIZATION_INVARIANT": "1", "DOTNET_CLI_TELEMETRY_OPTOUT": "1",
                        "DOTNET_TieredPGO": "0"},
                   details={"dotnet": version, "source": "PyPI dotnetcore2"})


# --------------------------------------------------------------------------- #
def ensure_venv(venv: Path, packages: list[str]) -> tuple[bool, str]:
    """A venv under build/ with the given PyPI packages; (ok, why-not)."""
    py = venv / "bin" / "python"
    if not py.exists():
        rc, out = _run([sys.executable, "-m", "venv", str(venv)], 300)
        if rc != 0:
            return False, f"python3 -m venv failed: {_tail(out, 2)}"
    missing = []
    for pkg in packages:
        mod = {"matplotlib": "matplotlib", "dotnetcore2": "dotnetcore2"}.get(pkg, pkg)
        rc, _ = _run([str(py), "-c", f"import {mod}"], 120)
        if rc != 0:
            missing.append(pkg)
    if not missing:
        return True, ""
    _log(f"pip install {' '.join(missing)} into {venv}")
    rc, out = _run([str(py), "-m", "pip", "install", "-q", "--disable-pip-version-check",
                    "--timeout", "30", "--retries", "1", *missing], 600)
    if rc != 0:
        return False, f"pip install {' '.join(missing)} failed (PyPI unreachable?): {_tail(out, 2)}"
    return True, ""


BUILDERS = ["go", "tokio", "rayon", "asio", "tbb", "java", "mono", "coreclr"]


def build_all(root: Path, rebuild: bool = False, only: list[str] | None = None,
              venv: Path | None = None) -> list[Program]:
    root.mkdir(parents=True, exist_ok=True)
    keys = [k for k in BUILDERS if only is None or k in only]

    def one(key: str) -> Program:
        try:
            if key == "coreclr":
                return build_coreclr(root, rebuild, venv)
            return globals()[f"build_{key}"](root, rebuild)
        except Exception as exc:  # a broken toolchain must not stop the benchmarks
            return Program(key, key, skipped=f"build error: {exc!r}")

    # cargo spends most of a first build fetching and compiling crates: build it beside the rest
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        programs = list(pool.map(one, keys))
    for p in programs:
        if p.skipped:
            _log(f"{p.runtime}: skipped: {p.skipped}")
    return programs

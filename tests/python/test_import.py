# SPDX-License-Identifier: MIT
"""The package imports from the build tree with PYTHONPATH=python alone."""
import os
import subprocess

from conftest import BUILD_ROOT, SOURCE_ROOT

PY = "/usr/bin/python3"


def _env(**extra):
    env = {k: v for k, v in os.environ.items() if k != "SBX_LIBRARY"}
    env["PYTHONPATH"] = str(SOURCE_ROOT / "python")
    env.update(extra)
    return env


def test_import_from_build_tree():
    r = subprocess.run([PY, "-c", "import sbx"], env=_env(), capture_output=True, text=True,
                       cwd="/")
    assert r.returncode == 0, r.stderr


def test_finds_the_built_library_without_setup():
    code = "import sbx; print(sbx.library_path()); print(sbx.resolve_backend('local'))"
    # No SBX_LIBRARY: found next to the package, in a build directory.
    r = subprocess.run([PY, "-c", code], env=_env(), capture_output=True, text=True, cwd="/")
    assert r.returncode == 0, r.stderr
    path, backend = r.stdout.split()
    assert os.path.basename(path) == "libsbx.so" and os.path.exists(path)
    assert os.path.dirname(os.path.dirname(path)) == str(SOURCE_ROOT)
    assert backend == "local"


def test_override_variable_names_a_missing_library():
    code = "import sbx\ntry:\n    sbx.resolve_backend(None)\nexcept ImportError as e:\n" \
           "    print('ImportError', e)\n"
    r = subprocess.run([PY, "-c", code], env=_env(SBX_LIBRARY="/nonexistent/libsbx.so"),
                       capture_output=True, text=True, cwd="/")
    assert r.returncode == 0, r.stderr
    assert "ImportError" in r.stdout and "SBX_LIBRARY" in r.stdout


def test_typed_package():
    assert (SOURCE_ROOT / "python" / "sbx" / "py.typed").exists()
    assert BUILD_ROOT.exists()


def test_meson_install_places_the_package(tmp_path):
    """`make install` (meson install) puts the package where Debian's python3
    looks and tells it where the library went."""
    import shutil
    import sysconfig
    meson = shutil.which("meson")
    if meson is None:
        import pytest
        pytest.skip("meson is not on PATH")
    r = subprocess.run([meson, "install", "--no-rebuild", "--quiet", "-C", str(BUILD_ROOT),
                        "--destdir", str(tmp_path)], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    inits = list(tmp_path.rglob("sbx/__init__.py"))
    assert len(inits) == 1
    pkg = inits[0].parent
    assert (pkg / "py.typed").exists() and (pkg / "_installed.py").exists()
    purelib = str(pkg.parent)[len(str(tmp_path)):]
    if purelib.startswith("/usr/local/"):  # the default prefix: on sys.path
        assert purelib == sysconfig.get_path("purelib")
    code = "import sbx._lib as l; print(l.candidates()[0])"
    r = subprocess.run([PY, "-c", code], env=_env(PYTHONPATH=str(pkg.parent)),
                       capture_output=True, text=True, cwd="/")
    assert r.returncode == 0, r.stderr
    lib = r.stdout.strip()
    assert lib.endswith("/libsbx.so.0") and (tmp_path / lib.lstrip("/")).exists()

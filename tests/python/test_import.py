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

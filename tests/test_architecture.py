"""The house's rules, checked: the layer contract in .importlinter holds, and no module of rlvr imports itself back
through others (no import circle, within a package or across packages)."""

from __future__ import annotations

from pathlib import Path

import grimp
import pytest
from importlinter.cli import lint_imports

ROOT = Path(__file__).resolve().parent.parent


def test_the_layer_contract_holds(monkeypatch):
    monkeypatch.chdir(ROOT)
    assert lint_imports(config_filename=str(ROOT / ".importlinter")) == 0, "run lint-imports to see the broken contract"


@pytest.fixture(scope="module")
def graph():
    return grimp.build_graph("rlvr")


def circles(graph) -> list[list[str]]:
    """One chain per import that closes a circle: a module importing a module that leads back to it."""
    found = []
    for module in sorted(graph.modules):
        for imported in sorted(graph.find_modules_directly_imported_by(module)):
            if imported == module:
                continue
            back = graph.find_shortest_chain(importer=imported, imported=module)
            if back is not None:
                found.append([module, *back])
    return found


def test_no_import_circles(graph):
    found = circles(graph)
    assert not found, "import circles: " + "; ".join(" -> ".join(chain) for chain in found[:5])


def test_the_circle_check_sees_a_circle():
    """The check itself: a graph in which a imports b and b imports a has a circle."""
    g = grimp.ImportGraph()
    for m in ("pkg", "pkg.a", "pkg.b"):
        g.add_module(m)
    g.add_import(importer="pkg.a", imported="pkg.b")
    g.add_import(importer="pkg.b", imported="pkg.a")
    assert circles(g)


def _module(name: str, source: str) -> dict:
    """Run `source` as if it were the module `name` (frames then carry that module name)."""
    namespace = {"__name__": name}
    exec(compile(source, f"<{name}>", "exec"), namespace)
    return namespace


def test_a_deprecation_called_by_rlvr_fails_and_a_library_internal_one_does_not():
    """tests/conftest.py turns a DeprecationWarning/FutureWarning into an error when rlvr's code made the call."""
    library = _module("transformers._probe", "import warnings\n"
                      "def old_api():\n    warnings.warn('old_api is deprecated', FutureWarning)\n"
                      "def other_old_api():\n    warnings.warn('other_old_api is deprecated', FutureWarning)\n")
    rlvr_code = _module("rlvr._probe", "def use(f):\n    return f()\n")
    other_library = _module("peft._probe", "def use(f):\n    return f()\n")
    with pytest.raises(FutureWarning, match="called from rlvr"):
        rlvr_code["use"](library["old_api"])
    # peft calling transformers' deprecated API is not rlvr's call: the warning is shown, nothing raised (no
    # catch_warnings here: it would set the guard aside).
    other_library["use"](library["other_old_api"])

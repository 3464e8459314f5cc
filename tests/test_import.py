"""Importing kvmagic and loading the extension stay cheap: no torch, transformers or pandas."""

from __future__ import annotations

import subprocess
import sys

CHECK = """
import sys
from IPython.core.interactiveshell import InteractiveShell
import kvmagic
ip = InteractiveShell.instance()
ip.run_line_magic("load_ext", "kvmagic")
assert "kvbench" in ip.magics_manager.magics["cell"] and "kvload" in ip.magics_manager.magics["line"]
heavy = sorted(m for m in ("torch", "transformers", "pandas") if m in sys.modules)
print(",".join(heavy) or "none")
"""


def test_load_ext_imports_nothing_heavy():
    out = subprocess.run([sys.executable, "-c", CHECK], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "none"


def test_public_api_is_lazy_but_complete():
    import kvmagic

    assert set(kvmagic.__all__) <= set(dir(kvmagic))
    assert kvmagic.DEFAULT_MODEL == "LGAI-EXAONE/EXAONE-4.0-1.2B"
    assert callable(kvmagic.load_model) and callable(kvmagic.run_benchmark)
    assert {"run_models", "ModelsResult"} <= set(dir(kvmagic))  # an add-on's own API, which the package names not
    assert kvmagic.run_models.__module__ == "kvmagic.addons.models.models_run"
    assert kvmagic.ModelsResult.__module__ == "kvmagic.addons.models.models_result"

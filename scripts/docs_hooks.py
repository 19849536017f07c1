"""mkdocs hooks (``hooks:`` in mkdocs.yml): the API reference finds the package in any checkout.

The repository's root is the package ``halfway`` and the checkout's folder may have any name, so
mkdocstrings' griffe reads the package through ``build/docs-src/halfway``, a link to the root made
here before the build (``paths: [build/docs-src]`` in mkdocs.yml), not through whatever checkout an
editable install points at.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from mkdocs.plugins import event_priority


# first of all plugins: mkdocstrings drops a search path that does not exist yet when it reads its config
@event_priority(100)
def on_config(config: Any) -> Any:
    root = Path(config.config_file_path).resolve().parent
    link = root / "build" / "docs-src" / "halfway"
    if not (link.is_symlink() and link.resolve() == root):
        link.parent.mkdir(parents=True, exist_ok=True)
        if link.is_symlink() or link.exists():
            link.unlink()
        os.symlink(root, link, target_is_directory=True)
    return config

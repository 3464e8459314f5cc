"""``python -m kvmagic``: the ``kvbench`` command."""

from .cli import main

raise SystemExit(main())

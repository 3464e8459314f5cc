"""``python -m kvmagic``: the ``kvbench`` command."""

from kvmagic.frontends.cli import main

raise SystemExit(main())

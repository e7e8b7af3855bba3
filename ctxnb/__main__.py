"""``python -m ctxnb``: the same as the ``ctxnb`` command."""

from .cli import main

raise SystemExit(main())

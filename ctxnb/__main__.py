"""``python -m ctxnb``: the same as the ``ctxnb`` command."""

from .cli.app import main

raise SystemExit(main())

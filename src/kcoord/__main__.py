"""``python -m kcoord serve``."""

from kcoord.cli import main

raise SystemExit(main())

"""``python -m cvxdp demo``."""

from cvxdp.cli import main

raise SystemExit(main())

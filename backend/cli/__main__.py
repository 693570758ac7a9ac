"""``python -m backend.cli``: the ``railyard`` command."""

import sys

from backend.cli import main

sys.exit(main())

"""``python -m tidal`` is the ``tidal`` command."""

import sys

from tidal.cli.main import main

sys.exit(main())

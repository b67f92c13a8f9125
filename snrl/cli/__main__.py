"""``python -m snrl.cli``: the ``snrl`` command."""

import sys

from snrl.cli import main

sys.exit(main())

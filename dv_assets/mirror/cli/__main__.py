"""`python -m dv_assets.mirror.cli`: the `dvmirror` console script."""

import sys

from dv_assets.mirror.cli import main

sys.exit(main())

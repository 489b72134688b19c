"""`python -m memstream` runs the command line."""

import sys

from memstream.cli.main import main

sys.exit(main())

"""``python -m l3p``: the ``l3p`` command."""
import sys

from l3p.cli import main

sys.exit(main())

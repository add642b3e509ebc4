"""``python -m l3p.serving --bundle DIR ...``: the planner server (the same as ``l3p serve``)."""

import sys

from l3p.serving.args import main

if __name__ == "__main__":
    sys.exit(main())

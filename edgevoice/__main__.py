import sys

from edgevoice.cli import main

sys.exit(main())

import sys

from leasehold.cli import main

sys.exit(main())

import sys

from syne_dyhpo.report.cli import main

sys.exit(main())
